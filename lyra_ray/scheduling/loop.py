"""The scheduling loop: one function, both drivers.

    while the clock gives a next instant (an event, or the core's next wakeup):
        events   = what every source has, in order    # arrivals / inbox, runs, serving
        folded   = core.fold(now, events)
        decision = core.decide(folded)
        store.commit(core, cycle)                      # durable before anything happens
        for sink in sinks: sink.apply(decision.actions)  # serving pool, Train executor
        store.applied(core, cycle)                     # what the sinks recorded, durable
        observers see the cycle                        # usage samples, metrics

The simulator supplies a virtual clock, the trace's arrivals and its fluid job model as
sources and sink, and a store that keeps nothing; the live scheduler a wall clock that a
submit wakes, its SQLite inbox, Ray Train and Ray Serve as sources and sinks, and SQLite.
Nothing else in either driver decides when to poll or what to fold: a source that
reports progress is told whether this cycle reads any (:meth:`SchedulerCore.reads_progress`),
and the clock waits for the earliest of the sources' next events and the core's wakeup.

Pure: no clock is read here. A driver that wants timings passes its own ``timer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from lyra_ray import model as m
from lyra_ray.model import Decision
from lyra_ray.scheduling.core import SchedulerCore


class Source(Protocol):
    """Where events come from: a trace's arrivals, an inbox, the runs, the serving pool."""

    reports_progress: ClassVar[bool]
    """Whether its events include progress reports a cycle may not read (see ``collect``)."""

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        """Its events up to ``now``. ``earlier``: what the sources before it gave this
        cycle (the serving pool follows the nodes the executor saw come and go);
        ``progress`` false: the core reads no progress this cycle, so a source may hold
        its (absolute) progress reports back for a later one."""
        ...


class Sink(Protocol):
    """What carries decisions out: the Train executor, the serving pool, the fluid model."""

    def apply(self, actions: Sequence[m.Action]) -> None: ...


@dataclass(frozen=True)
class Cycle:
    """One pass of the loop, as the store and the observers see it."""

    now: float
    events: tuple[m.Event, ...]
    decision: Decision
    started: float = 0.0
    """The driver's ``timer`` when the cycle began (0 without one)."""
    step_s: float = 0.0
    """Seconds in fold + decide, by the driver's ``timer`` (0 without one)."""
    decided: float = 0.0
    """The driver's ``timer`` when ``decide`` returned (0 without one): where a restart's
    phases start, before the commit and the sinks."""


class Store(Protocol):
    def commit(self, core: SchedulerCore, cycle: Cycle) -> None:
        """Make the decision durable before any sink acts on it (live); or nothing."""
        ...

    def applied(self, core: SchedulerCore, cycle: Cycle) -> None:
        """After the sinks: make what they recorded durable (live); or nothing."""
        ...


class Observer(Protocol):
    def observe(self, core: SchedulerCore, cycle: Cycle) -> None: ...


class Clock(Protocol):
    def next(self, wakeup: float | None) -> float | None:
        """The instant of the next cycle, waiting for it (live) or jumping to it (a
        virtual clock): the earliest of a source's next event and ``wakeup``, the core's
        next round boundary. ``None`` ends the loop."""
        ...


class NoStore:
    """The simulator's store: a replay keeps nothing between cycles."""

    def commit(self, core: SchedulerCore, cycle: Cycle) -> None:
        return None

    def applied(self, core: SchedulerCore, cycle: Cycle) -> None:
        return None


def run_cycle(
    core: SchedulerCore,
    now: float,
    sources: Sequence[Source],
    sinks: Sequence[Sink],
    store: Store,
    observers: Sequence[Observer] = (),
    timer: Callable[[], float] | None = None,
) -> Cycle:
    """One cycle at ``now`` (never before the core's own time)."""
    started = timer() if timer is not None else 0.0
    now = max(now, core.now)
    events: list[m.Event] = []
    for source in sources:
        progress = not source.reports_progress or core.reads_progress(now, events)
        events += source.collect(now, events, progress)
    t0 = timer() if timer is not None else 0.0
    decision = core.decide(core.fold(now, events))
    decided = timer() if timer is not None else 0.0
    cycle = Cycle(now, tuple(events), decision, started, decided - t0, decided)
    store.commit(core, cycle)
    if decision.actions:
        for sink in sinks:
            sink.apply(decision.actions)
    store.applied(core, cycle)
    for o in observers:
        o.observe(core, cycle)
    return cycle


def loop(
    core: SchedulerCore,
    clock: Clock,
    sources: Sequence[Source],
    sinks: Sequence[Sink],
    store: Store,
    observers: Sequence[Observer] = (),
    *,
    guard: contextlib.AbstractContextManager[object] | None = None,
    on_error: Callable[[Exception], None] | None = None,
    timer: Callable[[], float] | None = None,
) -> int:
    """Run cycles until the clock ends the loop; returns how many ran.

    ``guard`` is held around each cycle (live: the lock the actor's other methods take);
    ``on_error``, if given, hears a cycle that raised and the loop goes on (live: a
    scheduler that stops scheduling on one bad cycle strands every job); without it the
    error ends the loop (the simulator: a replay must not hide one).
    """
    wakeup: float | None = None
    cycles = 0
    while (now := clock.next(wakeup)) is not None:
        try:
            with guard if guard is not None else contextlib.nullcontext():
                cycle = run_cycle(core, now, sources, sinks, store, observers, timer)
            wakeup = cycle.decision.next_wakeup
        except Exception as e:
            if on_error is None:
                raise
            on_error(e)
        cycles += 1
    return cycles
