"""SimRuntime: carries out the core's actions on a virtual clock.

It models what the live runtime does physically: a running job makes progress at its
throughput on its assignment (its pair throughput when space-sharing), and each resume
or resize first pays ``resize_overhead_s`` of checkpoint/restore during which the job
holds its GPUs but makes no progress. It decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lyra_ray import model as m
from lyra_ray.model import Assignment, JobId, JobSpec

_EPS = 1e-9


@dataclass(slots=True)
class _Run:
    assignment: Assignment
    rate: float
    productive_from: float


class SimRuntime:
    def __init__(self, throughputs: m.ThroughputModel, resize_overhead_s: float = 0.0) -> None:
        self.throughputs = throughputs
        self.overhead = resize_overhead_s
        self.now = 0.0
        self.specs: dict[JobId, JobSpec] = {}
        self.steps: dict[JobId, float] = {}
        self.runs: dict[JobId, _Run] = {}
        self.started: set[JobId] = set()
        self._changed: set[JobId] = set()
        self.serve_replicas: int | None = None

    def register(self, job_id: JobId, spec: JobSpec) -> None:
        self.specs[job_id] = spec
        self.steps[job_id] = 0.0

    # ---------------------------------------------------------------- time

    def advance(self, t: float) -> None:
        """Move the clock to ``t``, crediting every running job its steps."""
        for jid, r in self.runs.items():
            start = max(self.now, r.productive_from)
            if t > start and r.rate > 0:
                total = self.specs[jid].total_steps
                self.steps[jid] = min(total, self.steps[jid] + r.rate * (t - start))
                self._changed.add(jid)
        self.now = t

    def next_completion(self) -> float | None:
        best: float | None = None
        for jid, r in self.runs.items():
            if r.rate <= 0:
                continue
            left = self.specs[jid].total_steps - self.steps[jid]
            t = max(self.now, r.productive_from) + left / r.rate
            if best is None or t < best:
                best = t
        return best

    # ---------------------------------------------------------------- Runtime protocol

    def poll(self) -> list[m.Event]:
        events: list[m.Event] = []
        done = []
        for jid in sorted(self._changed):
            total = self.specs[jid].total_steps
            if jid in self.runs and self.steps[jid] >= total * (1 - _EPS) - _EPS:
                self.steps[jid] = total
                done.append(jid)
            else:
                events.append(m.JobProgress(jid, self.steps[jid]))
        self._changed.clear()
        for jid in done:
            del self.runs[jid]
            events.append(m.JobCompleted(jid, self.specs[jid].total_steps))
        return events

    def apply(self, actions: Sequence[m.Action]) -> None:
        for a in actions:
            if isinstance(a, m.Preempt | m.Finish):
                self.runs.pop(a.job_id, None)
            elif isinstance(a, m.Launch | m.Resize):
                resumed = a.job_id in self.started
                self.started.add(a.job_id)
                pay = self.overhead if (resumed or isinstance(a, m.Resize)) else 0.0
                self.runs[a.job_id] = _Run(a.assignment, 0.0, self.now + pay)
            elif isinstance(a, m.ScaleServe):
                self.serve_replicas = a.replicas
        if actions:
            self._rerate()

    def _rerate(self) -> None:
        """Recompute every running job's rate (a partner change alters pair throughput)."""
        for jid, r in self.runs.items():
            a, spec = r.assignment, self.specs[jid]
            rate = self.throughputs.throughput(spec, a.gpu_type, a.workers)
            if a.partner is not None and a.partner in self.runs:
                pair = self.throughputs.pair_throughput(spec, self.specs[a.partner], a.gpu_type)
                if pair is not None:
                    rate = pair[0]
            r.rate = rate
