"""Every metric lyra exports: one definition, read by the exporter, the docs, the
dashboard and the simulator's report.

WHY one list: a dashboard panel that queries a metric nobody exports shows "no data"
forever and nobody notices. The dashboard builder resolves names through
:func:`metric`, which refuses unknown ones, and a live test queries every panel against
a real Prometheus.

Names follow Prometheus conventions: the ``lyra_`` prefix, the unit in the name, and
``_total`` on counters. Ray exports ``ray.util.metrics`` with a ``ray_`` prefix and adds
``_total`` to counters itself, so :attr:`MetricDef.ray_name` is what the exporter
registers and :attr:`MetricDef.scraped` what Prometheus stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["gauge", "counter", "histogram"]

RAY_PREFIX = "ray_"
"""What Ray puts in front of every application metric on its metrics endpoint."""

LATENCY_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECLAIM_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0)
RESTART_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    source: str = "scheduler"
    """Which process exports it: ``scheduler`` or a service's ``ingress``."""

    def __post_init__(self) -> None:
        if not self.name.startswith("lyra_"):
            raise ValueError(f"metric {self.name!r}: field 'name': must start with 'lyra_'")
        if (self.kind == "counter") != self.name.endswith("_total"):
            raise ValueError(f"metric {self.name!r}: field 'name': '_total' is for counters")
        if (self.kind == "histogram") != bool(self.buckets):
            raise ValueError(f"metric {self.name!r}: field 'buckets': histograms only")

    @property
    def ray_name(self) -> str:
        """The name given to ``ray.util.metrics`` (Ray appends ``_total`` to counters)."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name

    @property
    def scraped(self) -> str:
        """The series name Prometheus stores (a histogram's series add a suffix)."""
        return RAY_PREFIX + self.name


STATE = ("state",)
JOB = ("job_id", "name")
"""``job_id``, not ``job``: Prometheus keeps ``job`` for the scrape job and would rename
ours to ``exported_job``."""

TEAM = ("team", "unit", "gpu_type")
"""A team's series: ``unit`` is ``gpus`` or ``effective`` (then ``gpu_type`` is
``effective``)."""

METRICS: tuple[MetricDef, ...] = (
    MetricDef("lyra_jobs", "gauge", "Jobs by state (queued, running, finished, ...).", STATE),
    MetricDef("lyra_queue_length", "gauge", "Jobs waiting for GPUs (not yet running)."),
    MetricDef(
        "lyra_queue_oldest_age_seconds",
        "gauge",
        "How long the oldest waiting job has waited since it arrived (0: none waits).",
    ),
    MetricDef(
        "lyra_gpus",
        "gauge",
        "GPUs by type, pool and use. Training pool: training | idle. Inference pool: "
        "serving (server not lent) | lent (lent server, GPU running training) | idle "
        "(lent server, GPU unused). The uses of a pool sum to its GPUs.",
        ("gpu_type", "pool", "use"),
    ),
    MetricDef(
        "lyra_inference_servers",
        "gauge",
        "Inference servers by loan state (serving, draining, lent, reclaiming).",
        STATE,
    ),
    MetricDef(
        "lyra_serving_demand_servers",
        "gauge",
        "Inference servers that serving needs now (the demand the policy sees).",
    ),
    MetricDef(
        "lyra_launches_total",
        "counter",
        "Training runs launched: first starts and restarts after a preemption.",
    ),
    MetricDef("lyra_preemptions_total", "counter", "Jobs preempted (checkpoint, stop)."),
    MetricDef("lyra_resizes_total", "counter", "Elastic jobs resized (grow or shrink)."),
    MetricDef("lyra_lends_total", "counter", "Inference servers lent to training."),
    MetricDef("lyra_reclaims_total", "counter", "Inference servers reclaimed for serving."),
    MetricDef(
        "lyra_scheduling_cycle_seconds",
        "histogram",
        "One scheduling cycle: poll, fold, decide, persist, apply.",
        buckets=LATENCY_BUCKETS_S,
    ),
    MetricDef(
        "lyra_policy_solve_seconds",
        "histogram",
        "One call of the allocation policy (the optimisation), labelled by policy.",
        ("policy",),
        buckets=LATENCY_BUCKETS_S,
    ),
    MetricDef(
        "lyra_reclaim_latency_seconds",
        "histogram",
        "From serving demand rising to the reclaimed server serving again.",
        buckets=RECLAIM_BUCKETS_S,
    ),
    MetricDef(
        "lyra_restart_phase_seconds",
        "histogram",
        "Where a resize's or preemption's time goes, by kind (resize, preempt) and phase: "
        "stop_signal (the scheduler's decision to the loop seeing the stop), checkpoint (to "
        "the checkpoint written), relaunch (to the next run started), workers_up (to its "
        "first worker reporting), first_step (to its first step), total (decision to first "
        "step).",
        ("kind", "phase"),
        buckets=RESTART_BUCKETS_S,
    ),
    MetricDef(
        "lyra_job_steps_per_second",
        "gauge",
        "A running job's training steps per second, over its last minute of progress.",
        JOB,
    ),
    MetricDef(
        "lyra_job_progress_ratio", "gauge", "A running job's steps done over its total.", JOB
    ),
    MetricDef(
        "lyra_job_fair_share_ratio",
        "gauge",
        "Gavel's priority, inverted: the share of time a running job has received since "
        "it arrived, over the share its allocation gives it (1: exactly its fair share).",
        JOB,
    ),
    MetricDef(
        "lyra_team_guarantee",
        "gauge",
        "A team's guaranteed quota, by GPU type (unit gpus) or gpu_type 'effective' "
        "(unit effective: GPUs of the reference type's effective throughput).",
        TEAM,
    ),
    MetricDef("lyra_team_used", "gauge", "What a team's running jobs use, as its quota.", TEAM),
    MetricDef(
        "lyra_team_borrowed",
        "gauge",
        "What a team uses beyond its guarantee (idle quota of others, unowned GPUs).",
        TEAM,
    ),
    MetricDef(
        "lyra_team_lent",
        "gauge",
        "The part of a team's idle guarantee that other teams' jobs use now.",
        TEAM,
    ),
    MetricDef(
        "lyra_autoscale_requested_nodes",
        "gauge",
        "Nodes of a type lyra asks Ray's autoscaler to keep: those with work now plus "
        "those the waiting jobs need, within the caps (0: none asked; idle ones go).",
        ("node_type",),
    ),
    MetricDef("lyra_autoscale_nodes", "gauge", "Nodes of a type that are up.", ("node_type",)),
    MetricDef(
        "lyra_autoscale_requests_total",
        "counter",
        "Times lyra changed what it asks the autoscaler for.",
    ),
    MetricDef(
        "lyra_autoscale_spend_usd",
        "gauge",
        "What the nodes above each type's min_workers have cost so far (list prices or "
        "the lyra section's), the figure the budget is checked against.",
    ),
    MetricDef(
        "lyra_service_requests_in_flight",
        "gauge",
        "Requests in flight at a service's ingress, averaged since the last cycle.",
        ("service",),
    ),
    MetricDef(
        "lyra_service_requests_total",
        "counter",
        "Requests a service's ingress finished, by outcome (ok, failed, rejected).",
        ("service", "outcome"),
    ),
    MetricDef(
        "lyra_moe_expert_tokens_total",
        "counter",
        "Tokens the gate of a MoE service sent to each expert.",
        ("service", "layer", "expert"),
        source="ingress",
    ),
    MetricDef(
        "lyra_moe_expert_replicas",
        "gauge",
        "Replicas of each expert in a MoE service's current plan (Lina).",
        ("service", "layer", "expert"),
        source="ingress",
    ),
)

_BY_NAME = {d.name: d for d in METRICS}


def metric(name: str) -> MetricDef:
    """The definition of ``name``; KeyError naming it if lyra exports no such metric."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no lyra metric {name!r}; known: {sorted(_BY_NAME)}") from None
