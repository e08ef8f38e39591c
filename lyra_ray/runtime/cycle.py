"""The live scheduler's side of the one loop (:func:`lyra_ray.scheduling.loop.loop`): its
wall clock, its SQLite inbox as a source, and its store.

Order inside one cycle: the inbox (submits and cancels the SDK queued), the executor's
poll (runs that stepped, ended or failed; nodes that came or went), the serving pool's
(drains, reclaims, demand) -> fold -> decide -> commit (state and consumed inbox rows in
one transaction) -> the serving pool and the executor apply -> commit what they recorded.
Committing before applying means a crash can only leave "decided but not yet done",
which :meth:`RayRuntime.reconcile` carries out on restart; never "done but forgotten",
which would run a job twice.

Kept apart from the actor so that the cycle can run without one: ``tests/sim/
test_one_loop.py`` drives it with the simulator's fluid model in place of Ray Train and
Ray Serve, through the real SQLite store, and gets the simulator's decisions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from lyra_ray import model as m
from lyra_ray.model.state import spec_from_dict
from lyra_ray.runtime.archive import JobArchive, hand_out_terminal
from lyra_ray.runtime.delta import Ledger
from lyra_ray.runtime.faults import FaultHook
from lyra_ray.runtime.gc_pacing import PacedGC
from lyra_ray.runtime.metrics import SchedulerMetrics
from lyra_ray.runtime.store import StateStore
from lyra_ray.runtime.wal_pacing import PacedCheckpoint
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Clock, Cycle, Observer, Sink, Source, loop


class Executor(Source, Sink, Protocol):
    """What runs the jobs: Ray Train live (:class:`~lyra_ray.runtime.ray_runtime.RayRuntime`)."""

    dirty: bool
    decided_at: float | None
    """Wall time of the decision the next ``apply`` carries out (set by the store)."""

    def forget(self, job_id: str) -> list[tuple[float, str, int, dict[str, Any]]]: ...

    def generation(self, job_id: str) -> int:
        """The job's latest generation (0: never started)."""
        ...

    def to_state(self) -> dict[str, Any]: ...

    def busy(self) -> bool:
        """A run is being stopped: poll often until it has let go."""
        ...


BUSY_PERIOD_S = 0.1
"""How often the loop polls while a run is being stopped (a resize or preemption under
way), instead of ``period_s``: the next generation starts as soon as the old one ended,
not up to a period later. Measured in ``benchmarks/resize_phases.py`` (relaunch)."""


class ServingSide(Source, Sink, Protocol):
    """The inference pool: Ray Serve live (:class:`~lyra_ray.runtime.serving.ServingPool`)."""

    def to_state(self) -> dict[str, Any]: ...


class Inbox:
    """The loop's first source: what the SDK queued in SQLite since the last commit."""

    reports_progress: ClassVar[bool] = False

    def __init__(self, store: StateStore, core: SchedulerCore) -> None:
        self.store, self.core = store, core
        self.consumed: list[int] = []
        """The rows this cycle read: marked consumed in the same commit as the state."""

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        rows = self.store.pending()
        self.consumed = [r[0] for r in rows]
        events: list[m.Event] = []
        for _seq, kind, jid, payload in rows:
            if kind == "submit":
                events.append(m.JobSubmitted(jid, spec_from_dict(payload)))
            elif kind == "cancel" and jid in self.core.jobs:
                events.append(m.JobCancelled(jid))
        return events


class LiveStore:
    """The loop's store: SQLite, written before the sinks act and again after them."""

    def __init__(
        self,
        store: StateStore,
        inbox: Inbox,
        executor: Executor,
        serving: ServingSide,
        archive: JobArchive,
        fault: FaultHook | None = None,
        restarts: int = 0,
    ) -> None:
        self.store, self.inbox, self.executor, self.serving = store, inbox, executor, serving
        self.archive = archive
        self.fault = fault if fault is not None else FaultHook()
        self.restarts = restarts
        self.reasons: dict[str, str] = {}
        """Why each failed job failed, until it is archived."""
        self.restored: dict[str, Any] = {}
        """What this scheduler resumed from its saved state (``ping`` shows it)."""
        self.commits: list[dict[str, float]] = []
        """Per commit: bytes written, seconds, jobs in the state (the per-cycle write)."""
        self.incremental = True
        """Write what changed (:class:`~lyra_ray.runtime.delta.Ledger`); False writes the
        whole state every commit (kept for ``benchmarks/scale_cycle.py``'s comparison)."""
        self.ledger = Ledger()

    def commit(self, core: SchedulerCore, cycle: Cycle) -> None:
        # the cycle's wall clock plus the timer's seconds to the end of decide()
        self.executor.decided_at = cycle.now + max(0.0, cycle.decided - cycle.started)
        for e in cycle.events:
            if isinstance(e, m.JobFailed):
                self.reasons[e.job_id] = e.reason
        hand_out_terminal(core, self.archive, self.executor, self.reasons)
        actions = cycle.decision.actions
        if (
            cycle.events
            or actions
            or self.inbox.consumed
            or self.executor.dirty
            or self.archive.pending
        ):
            self.save(core, self.inbox.consumed)
        self.inbox.consumed = []
        if actions:
            self.fault.at("after_persist")

    def applied(self, core: SchedulerCore, cycle: Cycle) -> None:
        if cycle.decision.actions:
            self.fault.at("after_apply")
            self.save(core, [])

    def save(self, core: SchedulerCore, consumed: list[int]) -> None:
        """Commit the state (and mark ``consumed`` inbox rows) in one transaction: what
        changed since the last commit, or the whole state when not :attr:`incremental`."""
        self.executor.dirty = False
        t0 = time.perf_counter()
        archive = self.archive.rows()
        extras = {
            "runtime": self.executor.to_state(),
            "serving": self.serving.to_state(),
            "reasons": self.reasons,
            "restarts": self.restarts,
        }
        if self.incremental:
            delta, accept = self.ledger.delta(core, extras)
            size = self.store.commit_delta(delta, consumed, archive)
            self.ledger.accept(accept)
        else:
            size = self.store.commit({"core": core.to_state(), **extras}, consumed, archive)
            self.ledger = Ledger()  # the store holds no parts now: the next delta is whole
        self.commits.append(
            {
                "bytes": size,
                "commit_s": time.perf_counter() - t0,
                "jobs": len(core.jobs),
                "archived": len(archive),
            }
        )
        del self.commits[:-5000]
        self.archive.committed(len(archive))


class WallClock:
    """Ray's state is polled, so a cycle runs at least every ``period_s``; the core's
    wakeup (a round boundary) comes sooner, and a submit or cancel sets ``wake``."""

    def __init__(self, period_s: float, wake: threading.Event) -> None:
        self.period_s, self.wake = period_s, wake
        self.stopped = False
        self._first = True

    def next(self, wakeup: float | None) -> float | None:
        if not self._first:
            wait = self.period_s
            if wakeup is not None:
                wait = min(wait, max(0.0, wakeup - time.time()))
            self.wake.wait(wait)
            self.wake.clear()
        self._first = False
        return None if self.stopped else time.time()

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()


class _CollectingClock:
    """A clock that lets the paced WAL checkpoint and collector run before it waits for
    the next cycle, and wakes sooner while the executor is busy (:data:`BUSY_PERIOD_S`)."""

    def __init__(
        self,
        clock: Clock,
        gc: PacedGC,
        wal: PacedCheckpoint,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        self.clock, self.gc, self.wal, self.busy = clock, gc, wal, busy

    def next(self, wakeup: float | None) -> float | None:
        self.wal.between()
        self.gc.between()
        if self.busy is not None and self.busy():
            soon = time.time() + BUSY_PERIOD_S
            wakeup = soon if wakeup is None else min(wakeup, soon)
        return self.clock.next(wakeup)


class LiveCycle:
    """The live loop's parts, wired: sources, sinks, store and observers."""

    def __init__(
        self,
        core: SchedulerCore,
        store: LiveStore,
        executor: Executor,
        serving: ServingSide,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.core, self.store, self.executor = core, store, executor
        self.sources: tuple[Source, ...] = (store.inbox, executor, serving)
        self.sinks: tuple[Sink, ...] = (serving, executor)
        """The serving pool first: a lent server starts draining before a run bound for
        it is queued, a reclaimed one is marked before its runs are stopped."""
        self.observers = tuple(observers)
        self.gc = PacedGC()
        """The collector runs between cycles, not inside them (see :mod:`.gc_pacing`)."""
        self.wal = PacedCheckpoint(store.store)
        """So do SQLite's WAL checkpoints (see :mod:`.wal_pacing`)."""

    def run(
        self,
        clock: Clock,
        guard: threading.RLock | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> int:
        """Cycles until ``clock`` ends them; ``on_error`` hears a failed cycle (live: the
        loop goes on)."""
        with self.gc, self.wal:
            busy = getattr(self.executor, "busy", None)
            return self._loop(_CollectingClock(clock, self.gc, self.wal, busy), guard, on_error)

    def _loop(
        self,
        clock: Clock,
        guard: threading.RLock | None,
        on_error: Callable[[Exception], None] | None,
    ) -> int:
        return loop(
            self.core,
            clock,
            self.sources,
            self.sinks,
            self.store,
            self.observers,
            guard=guard,
            on_error=on_error,
            timer=time.perf_counter,
        )


def restored_runs(core: SchedulerCore) -> Mapping[str, m.Assignment]:
    """What a restarted scheduler's executor must have running: the core's running jobs."""
    return {
        j.id: j.current
        for j in core.active()
        if j.status is m.JobStatus.RUNNING and j.current is not None
    }


class CycleStats:
    """The loop's observer: exports the cycle's metrics (if on) and keeps the last cycles'
    timings for ``stats`` (what ``benchmarks/live_overhead.py`` reads)."""

    def __init__(
        self,
        metrics: SchedulerMetrics | None,
        serving_view: Callable[[], Mapping[str, Any]],
        fresh_restarts: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.metrics = metrics
        self.serving_view, self.fresh_restarts = serving_view, fresh_restarts
        self.cycle_s: list[dict[str, float]] = []

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        m0 = time.perf_counter()
        exported = self.metrics is not None and self.metrics.enabled
        if self.metrics is not None and exported:
            self.metrics.observe_cycle(
                core, cycle.decision.actions, m0 - cycle.started, self.serving_view()
            )
            self.metrics.observe_restarts(self.fresh_restarts())
        if cycle.events:  # a cycle that had something to decide
            self.cycle_s.append(
                {
                    "cycle_s": time.perf_counter() - cycle.started,
                    "metrics_s": time.perf_counter() - m0,
                    "metrics": exported,
                    "step_s": cycle.step_s,
                    "events": len(cycle.events),
                    "jobs": len(core.active()),
                }
            )
            del self.cycle_s[:-5000]
