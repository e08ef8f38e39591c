"""SimRuntime: carries out the core's actions on a virtual clock.

It models what the live runtime does physically: a running job makes progress at its
throughput on its assignment (its pair throughput when space-sharing; the mixed-type
model of :mod:`lyra_ray.model.mixed` when its workers span GPU types), and each resume
or resize first pays a checkpoint/restore during which the job holds its GPUs but makes
no progress: the job's own price by the restart model when one is given (its checkpoint
and start-up, :mod:`lyra_ray.model.restart_cost`), else ``resize_overhead_s`` for every
job. It decides nothing.

With a ``network`` model (:class:`RateModel`, e.g. ``lyra_ray.network.ring.RingCommModel``)
a run's rate also depends on where it was placed and on who shares the links with it,
so every run is re-rated whenever the set of runs changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import ClassVar, Protocol

from lyra_ray import model as m
from lyra_ray.model import Assignment, JobId, JobSpec
from lyra_ray.model.mixed import mixed_throughput
from lyra_ray.model.restart_cost import RestartModel

_EPS = 1e-9
_FINISH = attrgetter("finish")
_STOPS = (m.Preempt, m.Finish)
_STARTS = (m.Launch, m.Resize)
"""Tuples built once: ``m.Preempt | m.Finish`` written in :meth:`SimRuntime.apply`
would build a union object for every action of a replay."""


@dataclass(slots=True)
class _Run:
    assignment: Assignment
    rate: float
    productive_from: float
    total: float
    finish: float = math.inf
    """When the run completes at ``rate``: fixed while the rate is (set in ``_rerate``)."""
    done_at: float = field(init=False, default=math.inf)
    """The step count from which it counts as complete (``total`` less a relative and an
    absolute epsilon), computed once rather than at every poll."""

    def __post_init__(self) -> None:
        self.done_at = self.total * (1 - _EPS) - _EPS


class RateModel(Protocol):
    """Placement-aware rates: each run's (spec, assignment, rate without it) -> rate."""

    def rates(
        self, runs: Mapping[JobId, tuple[JobSpec, Assignment, float]]
    ) -> dict[JobId, float]: ...


class SimRuntime:
    def __init__(
        self,
        throughputs: m.ThroughputModel,
        resize_overhead_s: float = 0.0,
        network: RateModel | None = None,
        restart_model: RestartModel | None = None,
    ) -> None:
        self.throughputs = throughputs
        self.overhead = resize_overhead_s
        self.restart = restart_model
        self.network = network
        self.now = 0.0
        self.specs: dict[JobId, JobSpec] = {}
        self.steps: dict[JobId, float] = {}
        self.runs: dict[JobId, _Run] = {}
        self._paired: set[JobId] = set()
        """The runs that share their GPUs with a partner (kept as ``runs`` changes, so
        :meth:`_rerate` need not scan every run after each action)."""
        self.started: set[JobId] = set()
        self._changed: set[JobId] = set()
        self._crossed: list[JobId] = []
        """Runs that reached their ``done_at`` in an :meth:`advance` since the last poll:
        steps move only there, so the poll looks at these rather than at every run."""
        self._next: tuple[float | None] | None = None
        """:meth:`next_completion` as :meth:`advance` found it, until runs change."""
        self.serve_replicas: int | None = None

    def register(self, job_id: JobId, spec: JobSpec) -> None:
        self.specs[job_id] = spec
        self.steps[job_id] = 0.0

    # ---------------------------------------------------------------- time

    def advance(self, t: float) -> None:
        """Move the clock to ``t``, crediting every running job its steps."""
        now, steps, changed, crossed = self.now, self.steps, self._changed, self._crossed
        for jid, r in self.runs.items():
            rate = r.rate
            if rate <= 0:
                continue
            pf = r.productive_from
            start = pf if pf > now else now  # max(now, pf), without the call
            if t > start:
                v = steps[jid] + rate * (t - start)
                total = r.total
                v = v if v < total else total  # min(total, v), without the call
                steps[jid] = v
                changed.add(jid)
                if v >= r.done_at:
                    crossed.append(jid)
        self.now = t

    def next_completion(self) -> float | None:
        """The earliest predicted completion, cached until the runs change: a run's
        finish time is fixed when its rate is set, so a clock move does not alter it."""
        if self._next is None:
            best = min(map(_FINISH, self.runs.values()), default=math.inf)
            self._next = (None if best == math.inf else best,)
        return self._next[0]

    # ---------------------------------------------------------------- the loop's source and sink

    reports_progress: ClassVar[bool] = True

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        """As a source of :func:`lyra_ray.scheduling.loop.loop`: run every job up to
        ``now``, then :meth:`poll`."""
        self.advance(now)
        return self.poll(progress)

    def poll(self, progress: bool = True) -> list[m.Event]:
        """Completions, and (unless ``progress`` is false) the steps of every job that moved.

        ``progress=False`` holds the progress reports back until a later poll (they carry
        absolute step counts, so nothing is lost): the simulator passes it for steps whose
        core cycle reads no progress (:meth:`SchedulerCore.holds_mid_round`).
        """
        events: list[m.Event] = []
        runs, steps = self.runs, self.steps
        done = sorted({jid for jid in self._crossed if jid in runs})
        self._crossed = []
        if progress:
            moved = self._changed.difference(done)
            if moved:  # one batched report: the core folds it in any order
                events.append(m.JobsProgress({jid: steps[jid] for jid in moved}))
            self._changed.clear()
        else:
            self._changed.difference_update(done)
        if done:
            self._next = None
        for jid in done:
            steps[jid] = self.specs[jid].total_steps
            del self.runs[jid]
            self._paired.discard(jid)
            events.append(m.JobCompleted(jid, self.specs[jid].total_steps))
        if done and self.network is not None:
            self._rerate([])  # the finished runs' links are free for the others
        return events

    def apply(self, actions: Sequence[m.Action]) -> None:
        started: list[JobId] = []
        for a in actions:
            if isinstance(a, _STOPS):
                self.runs.pop(a.job_id, None)
                self._paired.discard(a.job_id)
            elif isinstance(a, _STARTS):
                resumed = a.job_id in self.started
                self.started.add(a.job_id)
                pay = 0.0
                if resumed or isinstance(a, m.Resize):
                    rm = self.restart
                    spec = self.specs[a.job_id]
                    pay = self.overhead if rm is None else rm.price(a.job_id, spec)
                total = self.specs[a.job_id].total_steps
                self.runs[a.job_id] = _Run(a.assignment, 0.0, self.now + pay, total)
                if a.assignment.partner is not None:
                    self._paired.add(a.job_id)
                else:
                    self._paired.discard(a.job_id)
                started.append(a.job_id)
            elif isinstance(a, m.ScaleServe):
                self.serve_replicas = a.replicas
        if actions:
            self._rerate(started)
            self._next = None

    def _rerate(self, started: list[JobId]) -> None:
        """Rate the runs just started, and every space-sharing run (a partner that starts
        or stops alters its pair throughput). A run alone keeps the rate it started with:
        the model is fixed for a simulation, so re-rating every run on every change
        would be work that changes nothing."""
        runs = self.runs
        todo = {jid for jid in started if jid in runs}
        todo.update(self._paired)
        if self.network is not None:
            todo = set(runs)  # runs sharing links slow each other down
        for jid in todo:
            r = runs[jid]
            a, spec = r.assignment, self.specs[jid]
            if a.extra:  # workers on several GPU types (docs/lyra.md, lyra_ray/model/mixed.py)
                rate = mixed_throughput(self.throughputs, spec, a.parts)
            else:
                rate = self.throughputs.throughput(spec, a.gpu_type, a.workers)
            if a.partner is not None and a.partner in runs:
                pair = self.throughputs.pair_throughput(spec, self.specs[a.partner], a.gpu_type)
                if pair is not None:
                    rate = pair[0]
            r.rate = rate
        if self.network is not None:
            adjusted = self.network.rates(
                {jid: (self.specs[jid], runs[jid].assignment, runs[jid].rate) for jid in todo}
            )
            for jid in todo:
                runs[jid].rate = adjusted[jid]
        for jid in todo:
            r = runs[jid]
            rate = r.rate
            if rate > 0:
                pf = r.productive_from
                r.finish = (pf if pf > self.now else self.now) + (r.total - self.steps[jid]) / rate
            else:
                r.finish = math.inf
