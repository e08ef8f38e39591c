"""The Grafana dashboard: valid for Grafana's own model, and it queries only what lyra exports."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm
from grafana_foundation_sdk.models import timeseries as tm

from lyra_ray.telemetry.catalogue import METRICS
from lyra_ray.telemetry.dashboard import (
    DATASOURCE_VAR,
    build_dashboard,
    iter_panels,
    prometheus_queries,
)
from lyra_ray.telemetry.panels import ROWS, TEAM_VAR, PanelSpec, Query

BY_NAME = {d.name: d for d in METRICS}
SERIES = re.compile(r"ray_lyra_[a-z0-9_]+")


def _metric_of(token: str) -> str:
    """The catalogue name behind a scraped series name, or "" for none."""
    name = token.removeprefix("ray_")
    if name in BY_NAME:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and base in BY_NAME and BY_NAME[base].kind == "histogram":
            return base
    return ""


def test_exported_json_loads_back_through_the_sdk_model_unchanged() -> None:
    register_default_plugins()  # so targets and options decode to their typed models
    data = json.loads(json.dumps(build_dashboard()))
    model = dm.Dashboard.from_json(data)
    again = json.loads(json.dumps(model, cls=JSONEncoder))
    assert again == data  # nothing unknown to the model was dropped, nothing added
    panels = [p for p in model.panels or [] if isinstance(p, dm.Panel)]
    assert len(panels) == sum(len(specs) for _, specs in ROWS)
    for p in panels:
        assert p.type_val == "timeseries"
        assert isinstance(p.options, tm.Options)
        assert p.targets and all(isinstance(t, pm.Dataquery) and t.expr for t in p.targets)


def test_build_is_deterministic() -> None:
    assert json.dumps(build_dashboard()) == json.dumps(build_dashboard())


def test_every_query_names_only_catalogue_metrics_and_every_metric_is_shown() -> None:
    seen: set[str] = set()
    for expr in prometheus_queries(build_dashboard()):
        tokens = SERIES.findall(expr)
        assert tokens, expr
        for token in tokens:
            name = _metric_of(token)
            assert name, f"{expr!r} queries {token!r}, which lyra does not export"
            seen.add(name)
    assert seen == set(BY_NAME)


def test_queries_group_only_by_labels_the_metric_has() -> None:
    for expr in prometheus_queries(build_dashboard()):
        (name,) = {_metric_of(t) for t in SERIES.findall(expr)}
        allowed = set(BY_NAME[name].labels) | {"le"}
        for group in re.findall(r"\bby \(([^)]*)\)", expr):
            assert {lb.strip() for lb in group.split(",")} <= allowed, expr


def test_queries_are_concrete_with_rate_windows_of_a_minute_or_more() -> None:
    queries = prometheus_queries(build_dashboard())
    assert len(queries) == sum(len(s.queries) for _, specs in ROWS for s in specs)
    seconds = {"s": 1, "m": 60, "h": 3600}
    for expr in queries:
        assert "$" not in expr and "{m}" not in expr, expr
        for n, unit in re.findall(r"\[(\d+)([smh])\]", expr):
            assert int(n) * seconds[unit] >= 60, expr
        if "rate(" in expr:
            assert re.search(r"\[\d+[smh]\]", expr), expr


def test_histograms_are_read_as_quantiles_of_bucket_rates() -> None:
    for expr in prometheus_queries(build_dashboard()):
        if "_bucket" in expr:
            assert expr.startswith("histogram_quantile(") and "sum by (le" in expr, expr


def test_every_panel_reads_the_datasource_variable() -> None:
    dashboard = build_dashboard()
    var, team = dashboard["templating"]["list"]
    assert (var["type"], var["name"], var["query"]) == ("datasource", DATASOURCE_VAR, "prometheus")
    ref = {"type": "prometheus", "uid": "${" + DATASOURCE_VAR + "}"}
    # the teams' row is repeated per value of a variable read from a metric lyra exports
    assert (team["type"], team["name"], team["datasource"]) == ("query", TEAM_VAR, ref)
    assert team["query"] == "label_values(ray_lyra_team_guarantee, team)"
    repeated = [p for p in dashboard["panels"] if p.get("repeat")]
    assert [(p["type"], p["repeat"]) for p in repeated] == [("row", TEAM_VAR)]
    panels = list(iter_panels(dashboard))
    assert panels
    for p in panels:
        assert p["datasource"] == ref
        assert all(t["datasource"] == ref for t in p["targets"])
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def _planted(query: Query) -> list[tuple[str, tuple[PanelSpec, ...]]]:
    return [*ROWS, ("Planted", (PanelSpec("planted", (query,)),))]


@pytest.mark.parametrize(
    ("query", "error", "needle"),
    [
        (Query("lyra_not_exported", "sum({m})", "x"), KeyError, "lyra_not_exported"),
        (Query("lyra_jobs", "sum({m}) + ray_lyra_typo", "x"), KeyError, "lyra_typo"),
        (Query("lyra_queue_length", "sum({m})", "x", "_bucket"), ValueError, "histograms"),
        (Query("lyra_job_progress_ratio", "max by (job) ({m})", "x"), ValueError, "'job'"),
        (Query("lyra_jobs", "sum by (state) ({m})", "{{pool}}"), ValueError, "'pool'"),
    ],
)
def test_a_planted_bad_query_fails_to_build(
    query: Query, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        build_dashboard(_planted(query))


def test_prometheus_queries_makes_grafana_intervals_concrete_in_nested_rows() -> None:
    def target(expr: str) -> dict[str, Any]:
        return {"refId": "A", "expr": expr}

    dashboard = {
        "panels": [
            {"type": "timeseries", "targets": [target("rate(a[$__rate_interval])")]},
            {
                "type": "row",
                "collapsed": True,
                "panels": [{"type": "timeseries", "targets": [target("rate(b[${__interval}])")]}],
            },
            {"type": "text"},
        ]
    }
    assert prometheus_queries(dashboard) == ["rate(a[1m])", "rate(b[1m])"]
    bad = {"panels": [{"type": "timeseries", "targets": [target("sum(x{node=~'$node'})")]}]}
    with pytest.raises(ValueError, match="node"):
        prometheus_queries(bad)
