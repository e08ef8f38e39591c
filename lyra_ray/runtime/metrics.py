"""The live scheduler's metrics, exported through ``ray.util.metrics``.

Ray publishes them on the metrics endpoint of the scheduler actor's node (prefixed
``ray_``), which Ray's Prometheus service discovery lists, so any Prometheus that
scrapes the cluster sees them (``lyra up --local --prometheus`` starts one). What each
metric means is in :mod:`lyra_ray.telemetry.catalogue`; the values come from the pure
:mod:`lyra_ray.telemetry.values`, the same code the simulator's report uses.

WHY gauges are set every cycle: Ray drops a gauge series that is not set again for about
20 s, so a job's series disappears soon after the job stops running, by design. Counters
start at 0 for every label set that exists up front, so a rate panel reads 0 instead of
"no data" before the first preemption.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lyra_ray import model as m
from lyra_ray.model.team_accounting import TeamStanding
from lyra_ray.policies.base import Policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.telemetry.catalogue import METRICS, MetricDef
from lyra_ray.telemetry.values import Sample, StepRates, action_counts, state_samples

log = logging.getLogger(__name__)


def _make(d: MetricDef) -> Any:
    from ray.util.metrics import Counter, Gauge, Histogram

    if d.kind == "gauge":
        return Gauge(d.ray_name, d.help, tag_keys=d.labels)
    if d.kind == "counter":
        return Counter(d.ray_name, d.help, tag_keys=d.labels)
    return Histogram(d.ray_name, d.help, boundaries=list(d.buckets), tag_keys=d.labels)


def _zero(counter: Any, tags: Mapping[str, str] | None = None) -> None:
    """Export a counter at 0 (``Counter.inc`` refuses 0; the recorder below takes it)."""
    try:
        counter._record(0.0, tags=dict(tags or {}))
    except Exception:  # a Ray without the private recorder: the series appears later
        log.debug("cannot pre-set counter %s", counter, exc_info=True)


OUTCOMES = (("ok", "completed"), ("failed", "failed"), ("rejected", "rejected"))
"""``lyra_service_requests_total``'s outcomes and the ingress counters behind them."""


class SchedulerMetrics:
    """Owns the scheduler's metric objects; :meth:`observe_cycle` after every cycle."""

    def __init__(self, scheduler_metrics: Iterable[MetricDef] | None = None) -> None:
        defs = [d for d in (scheduler_metrics or METRICS) if d.source == "scheduler"]
        self.m: dict[str, Any] = {d.name: _make(d) for d in defs}
        for d in defs:
            if d.kind == "counter" and not d.labels:
                _zero(self.m[d.name])
        self.enabled = True
        """Off: the scheduler skips :meth:`observe_cycle` (``set_metrics_export``)."""
        self.rates = StepRates()
        self._reclaims_seen = 0
        self._requests: dict[tuple[str, str], float] = {}

    def _set(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            g = self.m.get(s.name)
            if g is not None:
                g.set(s.value, tags=dict(s.labels))

    def _inc(self, name: str, value: float, tags: Mapping[str, str] | None = None) -> None:
        if value > 0:
            self.m[name].inc(value, tags=dict(tags or {}))

    def observe_cycle(
        self,
        core: SchedulerCore,
        actions: Iterable[m.Action],
        cycle_s: float,
        serving: Mapping[str, Any] | None = None,
    ) -> None:
        """Everything a cycle changed. ``serving``: ``servers`` (node -> loan state),
        ``reclaims`` (every finished reclaim so far, each with ``latency_s``) and
        ``stats`` (per service its ingress's request counters, with ``name``)."""
        try:
            self._observe(core, actions, cycle_s, serving or {})
        except Exception:  # metrics must never stop scheduling
            log.warning("exporting metrics failed", exc_info=True)

    def _observe(
        self,
        core: SchedulerCore,
        actions: Iterable[m.Action],
        cycle_s: float,
        serving: Mapping[str, Any],
    ) -> None:
        running = [(j.id, j.steps_done) for j in core.active() if j.current is not None]
        rates = self.rates.update(core.now, running)
        self._set(state_samples(core, serving.get("servers"), rates))
        for name, n in action_counts(actions).items():
            self._inc(name, n)
        self.m["lyra_scheduling_cycle_seconds"].observe(cycle_s)
        reclaims = list(serving.get("reclaims", []))
        for r in reclaims[self._reclaims_seen :]:
            self.m["lyra_reclaim_latency_seconds"].observe(float(r["latency_s"]))
        self._reclaims_seen = len(reclaims)
        for svc in serving.get("stats", []):
            name = str(svc["name"])
            self.m["lyra_service_requests_in_flight"].set(
                float(svc.get("ongoing_avg", 0.0)), tags={"service": name}
            )
            for outcome, key in OUTCOMES:
                total = float(svc.get(key, 0))
                before = self._requests.get((name, outcome))
                tags = {"service": name, "outcome": outcome}
                if before is None:
                    _zero(self.m["lyra_service_requests_total"], tags)
                    before = total  # counted by an earlier scheduler: not this one's
                elif total < before:  # the ingress restarted: its counts began again
                    before = 0.0
                self._inc("lyra_service_requests_total", total - before, tags)
                self._requests[(name, outcome)] = total

    def observe_restarts(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Finished resize/preemption records (``lyra_ray.runtime.restart_phases``)."""
        h = self.m.get("lyra_restart_phase_seconds")
        if h is None:
            return
        for r in records:
            tags = {"kind": str(r["kind"])}
            for phase, s in r["phases"].items():
                h.observe(float(s), tags={**tags, "phase": phase.removesuffix("_s")})
            if r.get("total_s") is not None:
                h.observe(float(r["total_s"]), tags={**tags, "phase": "total"})

    def observe_teams(self, standings: Iterable[TeamStanding]) -> None:
        """Each team's guarantee, use, borrowed and lent capacity (``lyra_team_*``), by
        GPU type, or ``effective`` (GPUs of the reference type); a team's quota types read 0 when
        unused, so a panel shows the team's whole guarantee line."""
        try:
            for st in standings:
                keys = set(st.guarantee or {}) | set(st.used) | set(st.borrowed) | set(st.lent)
                for name, amounts in (
                    ("lyra_team_guarantee", st.guarantee or {}),
                    ("lyra_team_used", st.used),
                    ("lyra_team_borrowed", st.borrowed),
                    ("lyra_team_lent", st.lent),
                ):
                    for k in sorted(keys):
                        tags = {"team": st.name, "unit": st.unit, "gpu_type": k}
                        self.m[name].set(float(amounts.get(k, 0.0)), tags=tags)
        except Exception:  # metrics must never stop scheduling
            log.warning("exporting team metrics failed", exc_info=True)

    def skip_reclaims(self, n: int) -> None:
        """The first ``n`` reclaims happened before this exporter (a restored state)."""
        self._reclaims_seen = n

    def observe_solve(self, policy: str, seconds: float) -> None:
        if self.enabled:
            self.m["lyra_policy_solve_seconds"].observe(seconds, tags={"policy": policy})


class TimedPolicy:
    """A policy whose ``allocate`` reports how long it took; every other hook is the
    wrapped policy's own. WHY a wrapper: the core is pure and reads no clock."""

    def __init__(self, inner: Policy, report: Callable[[str, float], None]) -> None:
        self._inner = inner
        self._report = report

    def allocate(self, snap: m.ClusterSnapshot) -> m.Allocation:
        t0 = time.perf_counter()
        try:
            return self._inner.allocate(snap)
        finally:
            name = str(getattr(self._inner, "name", type(self._inner).__name__))
            self._report(name, time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
