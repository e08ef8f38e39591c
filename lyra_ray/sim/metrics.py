"""Metrics of a simulated run: per-job records and cluster usage over time.

Usage is integrated exactly over the piecewise-constant state between two core steps,
so the numbers do not depend on a sampling period.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lyra_ray import model as m
from lyra_ray.model import JobStatus, Node
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.telemetry.values import action_counts


@dataclass(slots=True)
class Sample:
    t: float
    busy_training: int  # GPUs running training on training-pool nodes
    busy_lent: int  # GPUs running training on lent inference nodes
    lent: int  # GPUs on loan
    serving: int  # inference GPUs serving
    queued: int
    running: int


def _training_only(core: SchedulerCore) -> tuple[int, int, int, int] | None:
    """(busy training GPUs, 0, queued, running) in one walk over the live jobs, for a
    cluster without inference nodes; ``None`` where a space-sharing pair runs (its GPUs
    count once: :meth:`CoreState.busy_gpus` knows how). Same integers as the general
    path, which builds a per-node dict and copies the job list at every sample."""
    busy = queued = running = 0
    for j in core.state.active_jobs():
        a = j.current
        if a is None:
            queued += 1
            continue
        if a.partner is not None:
            return None
        running += 1
        for _, g in a.nodes:
            busy += g
    return busy, 0, queued, running


@dataclass
class Recorder:
    training_gpus: int
    total_gpus: int
    samples: list[Sample] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=lambda: action_counts(()))
    """The live scheduler's action counters (``lyra_*_total``), counted the same way."""
    _nodes: tuple[Node, ...] | None = field(default=None, repr=False)
    _inference: int = 0
    _server: int = 0

    def record(self, t: float, core: SchedulerCore, actions: Sequence[m.Action] = ()) -> None:
        if actions:
            for name, n in action_counts(actions).items():
                self.counters[name] += n
        nodes, inference_ids = core.nodes_info()
        counts = None if inference_ids else _training_only(core)
        if counts is not None:
            busy_t, busy_l, queued, running = counts
        else:
            busy = core.busy_gpus()
            busy_l = sum(g for n, g in busy.items() if n in inference_ids)
            busy_t = sum(busy.values()) - busy_l
            active = core.active()
            queued = sum(1 for j in active if j.current is None)
            running = len(active) - queued
        if self._nodes is not nodes:  # node-derived totals, recomputed when nodes change
            inf = [n.num_gpus for n in nodes if n.pool == "inference"]
            self._nodes, self._inference, self._server = nodes, sum(inf), max(inf, default=0)
        lent = sum(core.nodes[n].num_gpus for n in core.lent if n in core.nodes)
        serving = min(self._inference - lent, core.serving_demand * self._server)
        s = Sample(t, busy_t, busy_l, lent, max(0, serving), queued, running)
        if self.samples and self.samples[-1].t == t:
            self.samples[-1] = s
        else:
            self.samples.append(s)

    def usage(self, end: float) -> dict[str, float]:
        if not self.samples:
            return {"gpu_usage_training": 0.0, "gpu_usage_overall": 0.0, "on_loan_utilisation": 0.0}
        t = np.array([s.t for s in self.samples] + [end])
        dt = np.diff(t)
        bt = np.array([s.busy_training for s in self.samples])
        bl = np.array([s.busy_lent for s in self.samples])
        lent = np.array([s.lent for s in self.samples])
        serving = np.array([s.serving for s in self.samples])
        span = float(t[-1] - t[0])
        if span <= 0:
            return {"gpu_usage_training": 0.0, "gpu_usage_overall": 0.0, "on_loan_utilisation": 0.0}
        lent_s = float((lent * dt).sum())
        return {
            "gpu_usage_training": float((bt * dt).sum()) / (self.training_gpus * span)
            if self.training_gpus
            else 0.0,
            "gpu_usage_overall": float(((bt + bl + serving) * dt).sum()) / (self.total_gpus * span),
            "on_loan_utilisation": float((bl * dt).sum()) / lent_s if lent_s > 0 else 0.0,
        }

    def metric_summary(self, end: float) -> dict[str, Any]:
        """The run in the live metrics' names (docs/observability.md), so a simulated
        and a live run compare panel by panel: counters as totals, gauges as their
        time-weighted mean and their maximum over the run."""
        out: dict[str, Any] = dict(self.counters)
        if not self.samples:
            return out
        t = np.array([s.t for s in self.samples] + [max(end, self.samples[-1].t)])
        dt = np.diff(t)
        span = float(t[-1] - t[0])

        def gauge(values: list[float]) -> dict[str, float]:
            a = np.asarray(values, dtype=float)
            mean = float((a * dt).sum() / span) if span > 0 else float(a[-1])
            return {"mean": mean, "max": float(a.max())}

        s = self.samples
        out["lyra_queue_length"] = gauge([x.queued for x in s])
        out["lyra_jobs{state=running}"] = gauge([x.running for x in s])
        tr = self.training_gpus
        out["lyra_gpus{pool=training,use=training}"] = gauge([x.busy_training for x in s])
        out["lyra_gpus{pool=training,use=idle}"] = gauge([tr - x.busy_training for x in s])
        # as live: every GPU of a server not lent is serving's
        out["lyra_gpus{pool=inference,use=serving}"] = gauge([self._inference - x.lent for x in s])
        out["lyra_gpus{pool=inference,use=lent}"] = gauge([x.busy_lent for x in s])
        out["lyra_gpus{pool=inference,use=idle}"] = gauge([x.lent - x.busy_lent for x in s])
        return out


def _median(s: list[float]) -> float:
    """``np.median`` of sorted finite values, to the bit: the middle value, or the two
    middle ones' sum halved."""
    h = len(s) // 2
    return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2


def _percentile(s: list[float], q: float) -> float:
    """``np.percentile(s, q)`` (its default, linear method) of sorted finite values, to
    the bit: numpy's virtual index ``(n - 1) q / 100`` and its ``_lerp``, which
    interpolates from the upper value where the fraction is at least one half."""
    n = len(s)
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return s[-1]
    i = math.floor(v)
    t = v - i
    a, b = s[i], s[i + 1]
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    """Mean, median and 95th percentile. The last two are numpy's own, computed in
    Python: ``np.median`` and ``np.percentile`` import ``numpy.ma`` (~10 ms of a
    replay's start-up, which ``benchmarks/sim_speed.py`` times) to check for masks."""
    if not values:
        return {f"avg_{prefix}_s": None, f"median_{prefix}_s": None, f"p95_{prefix}_s": None}
    a = np.asarray(values, dtype=float)
    s = sorted(float(x) for x in values)
    return {
        f"avg_{prefix}_s": float(a.mean()),
        f"median_{prefix}_s": _median(s),
        f"p95_{prefix}_s": _percentile(s, 95),
    }


def job_records(core: SchedulerCore, order: list[str]) -> list[dict[str, Any]]:
    """One record per submitted job; a run cut short (``max_time_s``) before a job's
    arrival has no record of it."""
    out = []
    for idx, jid in enumerate(order):
        j = core.jobs.get(jid)
        if j is None:
            continue
        jct = (
            None
            if j.finish_s is None or j.status is not JobStatus.FINISHED
            else (j.finish_s - j.arrival_s)
        )
        queue = None if j.first_start_s is None else j.first_start_s - j.arrival_s
        out.append(
            {
                "index": idx,
                "id": jid,
                "name": j.spec.name,
                "status": j.status.value,
                "arrival_s": j.arrival_s,
                "first_start_s": j.first_start_s,
                "finish_s": j.finish_s,
                "jct_s": jct,
                "queue_s": queue,
                "preemptions": j.num_preemptions,
                "resizes": j.num_resizes,
                "reclaim_preemptions": j.reclaim_preemptions,
                "steps_done": j.steps_done,
                "total_steps": j.spec.total_steps,
            }
        )
    return out


def summarise(
    records: list[dict[str, Any]], window: tuple[int, int] | None = None
) -> dict[str, Any]:
    """Averages over finished jobs, optionally only over job indices ``first..last``."""
    sel = (
        records if window is None else [r for r in records if window[0] <= r["index"] <= window[1]]
    )
    jcts = [r["jct_s"] for r in sel if r["jct_s"] is not None]
    queues = [r["queue_s"] for r in sel if r["queue_s"] is not None]
    finishes = [r["finish_s"] for r in records if r["finish_s"] is not None]
    arrivals = [r["arrival_s"] for r in records]
    out: dict[str, Any] = {}
    out.update(_stats(jcts, "jct"))
    out.update(_stats(queues, "queue"))
    out["makespan_s"] = (max(finishes) - min(arrivals)) if finishes else None
    out["preemption_ratio"] = (
        sum(1 for r in records if r["preemptions"] > 0) / len(records) if records else 0.0
    )
    out["completed_jobs"] = sum(1 for r in records if r["status"] == "finished")
    out["total_jobs"] = len(records)
    out["window_jobs"] = len(sel)
    out["resizes"] = sum(r["resizes"] for r in records)
    out["preemptions"] = sum(r["preemptions"] for r in records)
    out["reclaim_preemptions"] = sum(r["reclaim_preemptions"] for r in records)
    return out
