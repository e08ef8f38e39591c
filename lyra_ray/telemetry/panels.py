"""What lyra's Grafana dashboard shows: its rows, panels and PromQL, as plain data.

WHY apart from the builder (:mod:`lyra_ray.telemetry.dashboard`): this table is what an
operator reads and changes; the builder turns it into Grafana's JSON model and resolves
every :class:`Query`'s metric through the catalogue, so a name lyra does not export
fails the build.

Query style, and why: aggregate (``sum by``/``max by``) instead of bare selectors, since
Ray adds its own labels (instance, session, node) that would split and rename series;
``max`` for a value every exporter reports alike (a plan, a queue length), so a
restarted scheduler's lingering series cannot double it; no filter such as ``> 0`` that
empties a panel while a counter merely stays at 0; rate windows of at least a minute
(``$__rate_interval`` is at least four times the 15 s min step the builder sets on
every query). Sparse events (policy solves, reclaims) use a fixed, longer window so a
quantile survives between two events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RATE = "$__rate_interval"
Series = Literal["", "_bucket", "_sum", "_count"]


@dataclass(frozen=True)
class Query:
    """One PromQL target: ``template`` holds ``{m}`` where the metric's series goes."""

    metric: str
    template: str
    legend: str
    series: Series = ""


@dataclass(frozen=True)
class PanelSpec:
    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    stacked: bool = False
    width: int = 12
    right_axis: tuple[tuple[str, str], ...] = ()
    """(legend, unit) of series drawn on a second, right-hand axis."""
    marker: float | None = None
    """Draw a dashed threshold line at this value (1 = exactly a fair share)."""


Row = tuple[str, tuple[PanelSpec, ...]]


def _by(agg: str, labels: str, name: str, legend: str) -> Query:
    return Query(name, f"{agg} by ({labels}) ({{m}})" if labels else f"{agg}({{m}})", legend)


def _gpus(by: str, legend: str) -> Query:
    """GPUs summed over the labels not in ``by``; each GPU group counted once (``max``)
    even while a restarted scheduler's old series lingers beside the new one."""
    return Query("lyra_gpus", f"sum by ({by}) (max by (gpu_type, pool, use) ({{m}}))", legend)


TEAM_VAR = "team"
"""The dashboard variable of the teams' row, repeated once per team (Grafana sets it to
one team in each copy of the row)."""
TEAMS_ROW = f"Team ${TEAM_VAR}"
REPEAT = {TEAMS_ROW: TEAM_VAR}
"""Rows Grafana repeats, by title: one copy per value of the variable."""


def _team(name: str, legend: str) -> Query:
    """The row's team's amount summed over its GPU types (each series once, as
    :func:`_gpus`)."""
    match = '{team=~"$' + TEAM_VAR + '"}'
    return Query(name, "sum by (team) (max by (team, unit, gpu_type) ({m}" + match + "))", legend)


def _per_min(name: str, legend: str) -> Query:
    return Query(name, f"60 * sum(rate({{m}}[{RATE}]))", legend)


def _quantile(q: float, name: str, window: str, legend: str, by: str = "le") -> Query:
    tpl = f"histogram_quantile({q}, sum by ({by}) (rate({{m}}[{window}])))"
    return Query(name, tpl, legend, "_bucket")


ROWS: tuple[Row, ...] = (
    (
        "Cluster GPUs",
        (
            PanelSpec(
                "GPUs by pool and use",
                (_gpus("pool, use", "{{pool}} / {{use}}"),),
                stacked=True,
            ),
            PanelSpec(
                "GPUs by type and use",
                (_gpus("gpu_type, use", "{{gpu_type}} / {{use}}"),),
                stacked=True,
            ),
        ),
    ),
    (
        "Serving and loans",
        (
            PanelSpec(
                "Serving demand and inference servers by loan state",
                (
                    _by("max", "state", "lyra_inference_servers", "{{state}}"),
                    _by("max", "", "lyra_serving_demand_servers", "demand"),
                ),
            ),
            PanelSpec(
                "Lends and reclaims per minute",
                (
                    _per_min("lyra_lends_total", "lends"),
                    _per_min("lyra_reclaims_total", "reclaims"),
                ),
                unit="opm",
            ),
            PanelSpec(
                "Reclaim latency",
                (
                    _quantile(0.5, "lyra_reclaim_latency_seconds", "15m", "p50"),
                    _quantile(0.99, "lyra_reclaim_latency_seconds", "15m", "p99"),
                ),
                unit="s",
            ),
            PanelSpec(
                "Resize and preemption phases (p50)",
                (
                    _quantile(
                        0.5,
                        "lyra_restart_phase_seconds",
                        "1h",
                        "{{kind}} {{phase}}",
                        by="le, kind, phase",
                    ),
                ),
                unit="s",
            ),
            PanelSpec(
                "Service requests in flight",
                (_by("max", "service", "lyra_service_requests_in_flight", "{{service}}"),),
            ),
            PanelSpec(
                "Service request rate by outcome",
                (
                    Query(
                        "lyra_service_requests_total",
                        f"sum by (service, outcome) (rate({{m}}[{RATE}]))",
                        "{{service}} {{outcome}}",
                    ),
                ),
                unit="reqps",
                width=24,
            ),
        ),
    ),
    (
        "Queue and jobs",
        (
            PanelSpec(
                "Queue length and oldest queued job",
                (
                    _by("max", "", "lyra_queue_length", "queued jobs"),
                    _by("max", "", "lyra_queue_oldest_age_seconds", "oldest wait"),
                ),
                right_axis=(("oldest wait", "s"),),
            ),
            PanelSpec("Jobs by state", (_by("max", "state", "lyra_jobs", "{{state}}"),)),
            PanelSpec(
                "Preemptions, resizes and launches per minute",
                (
                    _per_min("lyra_preemptions_total", "preemptions"),
                    _per_min("lyra_resizes_total", "resizes"),
                    _per_min("lyra_launches_total", "launches"),
                ),
                unit="opm",
                width=24,
            ),
        ),
    ),
    (
        "Scheduler latency",
        (
            PanelSpec(
                "Scheduling cycle latency p50 / p99",
                (
                    _quantile(0.5, "lyra_scheduling_cycle_seconds", RATE, "p50"),
                    _quantile(0.99, "lyra_scheduling_cycle_seconds", RATE, "p99"),
                ),
                unit="s",
            ),
            PanelSpec(
                "Policy solve time p99",
                (_quantile(0.99, "lyra_policy_solve_seconds", "5m", "{{policy}}", "le, policy"),),
                unit="s",
            ),
        ),
    ),
    (
        "Per-job progress",
        (
            PanelSpec(
                "Job progress",
                (_by("max", "job_id, name", "lyra_job_progress_ratio", "{{name}}"),),
                unit="percentunit",
                width=8,
            ),
            PanelSpec(
                "Job steps per second",
                (_by("max", "job_id, name", "lyra_job_steps_per_second", "{{name}}"),),
                width=8,
            ),
            PanelSpec(
                "Job fair-share ratio (1 = its fair share)",
                (_by("max", "job_id, name", "lyra_job_fair_share_ratio", "{{name}}"),),
                width=8,
                marker=1.0,
            ),
        ),
    ),
    (
        "Autoscaling",
        (
            PanelSpec(
                "Nodes asked of the autoscaler, and up, by node type",
                (
                    _by(
                        "max", "node_type", "lyra_autoscale_requested_nodes", "{{node_type}} asked"
                    ),
                    _by("max", "node_type", "lyra_autoscale_nodes", "{{node_type}} up"),
                ),
            ),
            PanelSpec(
                "Requests changed per minute, and spend",
                (
                    _per_min("lyra_autoscale_requests_total", "requests"),
                    _by("max", "", "lyra_autoscale_spend_usd", "spend (USD)"),
                ),
                unit="opm",
                right_axis=(("spend (USD)", "currencyUSD"),),
            ),
        ),
    ),
    (
        TEAMS_ROW,
        (
            PanelSpec(
                "Team use and guarantee",
                (
                    _team("lyra_team_used", "used"),
                    _team("lyra_team_guarantee", "guarantee"),
                ),
                width=12,
            ),
            PanelSpec(
                "Team borrowed and lent",
                (
                    _team("lyra_team_borrowed", "borrowed"),
                    _team("lyra_team_lent", "lent"),
                ),
                width=12,
            ),
        ),
    ),
    (
        "MoE serving",
        (
            PanelSpec(
                "MoE expert load (tokens/s)",
                (
                    Query(
                        "lyra_moe_expert_tokens_total",
                        f"sum by (service, layer, expert) (rate({{m}}[{RATE}]))",
                        "{{service}} L{{layer}} E{{expert}}",
                    ),
                ),
            ),
            PanelSpec(
                "MoE replicas per expert",
                (
                    _by(
                        "max",
                        "service, layer, expert",
                        "lyra_moe_expert_replicas",
                        "{{service}} L{{layer}} E{{expert}}",
                    ),
                ),
            ),
        ),
    ),
)
