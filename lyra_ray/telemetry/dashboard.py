"""lyra's Grafana dashboard, as code, built with the typed ``grafana-foundation-sdk``.

WHY a typed builder over a table of panels (:mod:`lyra_ray.telemetry.panels`) rather
than hand-written JSON: every PromQL expression is rendered from a
:class:`~lyra_ray.telemetry.panels.Query` whose metric is resolved through
:func:`lyra_ray.telemetry.catalogue.metric` while the dashboard is built, and the
rendered text is scanned again for any ``ray_lyra_*`` name, so a panel that queries a
metric lyra does not export cannot be built at all (it would otherwise show "no data"
forever). :func:`prometheus_queries` gives the live test every expression in a form
Prometheus's HTTP API runs as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import timeseries as ts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

from lyra_ray.telemetry.catalogue import METRICS, RAY_PREFIX, metric
from lyra_ray.telemetry.panels import REPEAT, ROWS, TEAM_VAR, PanelSpec, Query, Row

UID = "lyra-ray"
TITLE = "lyra-ray: GPUs, queue, loans, jobs"
DATASOURCE_VAR = "datasource"
"""The template variable's name; Ray's own dashboards use the same one, so a link with
``var-datasource=<RAY_PROMETHEUS_NAME>`` selects the same Prometheus in both."""
MIN_STEP = "15s"

_NAME = re.compile(r"\b" + RAY_PREFIX + r"lyra_[a-z0-9_]+")
_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def _check_names(expr: str) -> None:
    """KeyError unless every ``ray_lyra_*`` series in ``expr`` is a catalogue metric's."""
    known = {d.name: d for d in METRICS}
    for token in _NAME.findall(expr):
        name = token.removeprefix(RAY_PREFIX)
        if name in known:
            continue
        base = next((name.removesuffix(s) for s in _HISTOGRAM_SERIES if name.endswith(s)), "")
        if base in known and known[base].kind == "histogram":
            continue
        metric(name)  # raises the KeyError that names it


_BY = re.compile(r"\bby \(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def render(q: Query) -> str:
    """The PromQL text of ``q``; KeyError for a metric lyra does not export.

    WHY labels are checked too: grouping by a label the metric lacks silently merges
    every series into one (``job`` is Prometheus's own scrape label, not lyra's job).
    """
    d = metric(q.metric)
    if q.series and d.kind != "histogram":
        raise ValueError(f"query of {q.metric!r}: {q.series!r} series exist for histograms only")
    allowed = set(d.labels) | ({"le"} if q.series == "_bucket" else set())
    used = [lb.strip() for g in _BY.findall(q.template) for lb in g.split(",") if lb.strip()]
    for label in [*used, *_LEGEND.findall(q.legend)]:
        if label not in allowed:
            raise ValueError(f"query of {q.metric!r}: no label {label!r}; it has {d.labels}")
    expr = q.template.replace("{m}", d.scraped + q.series)
    _check_names(expr)
    return expr


def _panel(spec: PanelSpec, pid: int, ds: dm.DataSourceRef) -> ts.Panel:
    helps = dict.fromkeys(
        f"{metric(q.metric).scraped}: {metric(q.metric).help}" for q in spec.queries
    )
    panel = (
        ts.Panel()
        .id(pid)
        .title(spec.title)
        .description("\n".join(helps))
        .datasource(ds)
        .unit(spec.unit)
        .span(spec.width)
        .height(8)
        .fill_opacity(40 if spec.stacked else 10)
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.LIST)
            .placement(cm.LegendPlacement.BOTTOM)
        )
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.NONE))
    )
    if spec.stacked:
        panel = panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    for legend, unit in spec.right_axis:
        panel = panel.override_by_name(
            legend,
            [
                dm.DynamicConfigValue("unit", unit),
                dm.DynamicConfigValue("custom.axisPlacement", "right"),
            ],
        )
    if spec.marker is not None:
        steps = [dm.Threshold(None, "transparent"), dm.Threshold(spec.marker, "orange")]
        panel = panel.thresholds(
            db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)
        ).thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.DASHED))
    for i, q in enumerate(spec.queries):
        panel = panel.with_target(
            prom.Dataquery()
            .expr(render(q))
            .legend_format(q.legend)
            .ref_id(chr(ord("A") + i))
            .interval(MIN_STEP)
            .datasource(ds)
            .range()
        )
    return panel


def build_dashboard(rows: Sequence[Row] = ROWS) -> dict[str, Any]:
    """The dashboard's JSON model (deterministic: same input, same JSON)."""
    ds = dm.DataSourceRef(type_val="prometheus", uid="${" + DATASOURCE_VAR + "}")
    dash = (
        db.Dashboard(TITLE)
        .uid(UID)
        .tags(["lyra-ray"])
        .description("lyra's scheduler, loans and serving, from the metrics lyra exports.")
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(db.DatasourceVariable(DATASOURCE_VAR).label("Prometheus").type("prometheus"))
        .with_variable(
            db.QueryVariable(TEAM_VAR)
            .label("Team")
            .datasource(ds)
            .query(f"label_values({metric('lyra_team_guarantee').scraped}, team)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .multi(True)
            .include_all(True)
        )
        .link(
            db.DashboardLink("Ray default dashboard")
            .type(dm.DashboardLinkType.LINK)
            .url("/d/rayDefaultDashboard")
            .keep_time(True)
            .include_vars(True)
        )
    )
    pid = 0
    for title, specs in rows:
        pid += 1
        row = db.Row(title).id(pid)
        if title in REPEAT:  # one copy of the row per value (the teams' row: per team)
            row = row.repeat(REPEAT[title])
        dash = dash.with_row(row)
        for spec in specs:
            pid += 1
            dash = dash.with_panel(_panel(spec, pid, ds))
    out: dict[str, Any] = json.loads(json.dumps(dash.build(), cls=JSONEncoder, sort_keys=True))
    return out


def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every panel that is not a row, rows' nested (collapsed) panels included."""
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            yield from iter_panels(p)
        else:
            yield p


GRAFANA_INTERVALS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}
"""What Grafana's built-in interval variables become outside Grafana."""
ROW_VARIABLES = {TEAM_VAR: ".+"}
"""What a repeated row's variable becomes outside Grafana: every value at once."""
_VAR = re.compile(r"\$(?:\{(\w+)\}|([A-Za-z_]\w*))")


def _concrete(expr: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        known = {**GRAFANA_INTERVALS, **ROW_VARIABLES}
        if name not in known:
            raise ValueError(f"query {expr!r}: variable ${name} has no value outside Grafana")
        return known[name]

    return _VAR.sub(sub, expr)


def prometheus_queries(dashboard: Mapping[str, Any]) -> list[str]:
    """Every panel's PromQL, with Grafana's interval variables made concrete windows."""
    return [_concrete(t["expr"]) for p in iter_panels(dashboard) for t in p.get("targets", [])]
