"""The simulation loop: trace arrivals and serving demand in, the real core in the middle.

Time jumps from one interesting instant to the next — an arrival, a predicted
completion, the core's next wakeup (a round boundary), a change of serving demand — so
the number of core steps grows with the trace's events, not with its simulated length.
The loop is the one the live scheduler runs (:func:`lyra_ray.scheduling.loop.loop`); this
module supplies its virtual clock, the trace as a source, the fluid job model
(:class:`~lyra_ray.sim.runtime.SimRuntime`) as source and sink, a store that keeps
nothing, and the usage recorder as an observer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from lyra_ray import model as m
from lyra_ray.model import JobSpec, Node
from lyra_ray.model.restart_cost import RestartModel
from lyra_ray.policies.base import Policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.interfaces import Placer
from lyra_ray.scheduling.loop import Cycle, NoStore, Observer, loop
from lyra_ray.sim.events import EventQueue
from lyra_ray.sim.metrics import Recorder, job_records, summarise
from lyra_ray.sim.runtime import RateModel, SimRuntime

log = logging.getLogger(__name__)

_QUIET = (m.JobsProgress, m.JobProgress)
"""Events that change no usage sample (busy, lent, serving, queued, running) by themselves."""


@dataclass
class SimResult:
    summary: dict[str, Any]
    jobs: list[dict[str, Any]]
    recorder: Recorder
    core: SchedulerCore
    events: int
    wall_s: float


class Simulator:
    def __init__(
        self,
        nodes: Sequence[Node],
        policy: Policy,
        throughputs: m.ThroughputModel,
        round_s: float = 360.0,
        resize_overhead_s: float = 0.0,
        serving_demand: Sequence[tuple[float, int]] = (),
        max_time_s: float | None = None,
        placer: Placer | None = None,
        network: RateModel | None = None,
        backfill: bool = False,
        observers: Sequence[Observer] = (),
        restart_model: RestartModel | None = None,
    ) -> None:
        """``placer`` replaces the core's consolidating placer; ``network`` makes a run's
        rate depend on its placement (see :class:`~lyra_ray.sim.runtime.SimRuntime`);
        ``backfill`` hands idle GPUs out mid-round as the live scheduler does (off:
        Gavel's rounds); ``observers`` see every cycle after the usage recorder (a
        benchmark's own measurements, e.g. each team's use over time); ``restart_model``
        charges each job its own restart price (:mod:`lyra_ray.model.restart_cost`)
        instead of ``resize_overhead_s``, and the policies price restarts by it."""
        self.observers = tuple(observers)
        self.nodes = list(nodes)
        self.core = SchedulerCore(
            policy,
            throughputs,
            round_s=round_s,
            placer=placer,
            backfill=backfill,
            restart_model=restart_model,
        )
        self.runtime = SimRuntime(throughputs, resize_overhead_s, network, restart_model)
        self.round_s = round_s
        self.demand = sorted(serving_demand)
        self.max_time_s = max_time_s

    def run(
        self,
        specs: Sequence[JobSpec],
        window: tuple[int, int] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> SimResult:
        wall0 = time.perf_counter()
        queue = EventQueue()
        for n in self.nodes:
            queue.push(0.0, m.NodeUp(n))
        for t, servers in self.demand:
            queue.push(t, m.ServingDemand(servers))
        order: list[str] = []
        for i, spec in enumerate(specs):
            jid = f"{i:06d}-{spec.name}" if spec.name != str(i) else f"{i:06d}"
            order.append(jid)
            self.runtime.register(jid, spec)
            queue.push(spec.arrival_s, m.JobSubmitted(jid, spec))
        recorder = Recorder(
            training_gpus=sum(n.num_gpus for n in self.nodes if n.pool == "training"),
            total_gpus=sum(n.num_gpus for n in self.nodes),
        )
        core, rt = self.core, self.runtime
        watch = _Watch(recorder, len(specs), progress)
        clock = _VirtualClock(queue, rt, watch, self.max_time_s)
        steps = loop(core, clock, [_Arrivals(queue), rt], [rt], NoStore(), [watch, *self.observers])
        if progress is not None:
            progress(watch.done, watch.total)
        records = job_records(core, order)
        summary = summarise(records, window)
        end = max((r["finish_s"] or 0.0) for r in records) if records else 0.0
        summary.update(recorder.usage(max(end, rt.now)))
        summary["reclaims"] = core.reclaims
        summary["metrics"] = recorder.metric_summary(max(end, rt.now))
        summary["core_steps"] = steps
        wall = time.perf_counter() - wall0
        summary["wall_s"] = wall
        return SimResult(summary, records, recorder, core, steps, wall)


class _Arrivals:
    """The trace (arrivals, nodes, serving demand) as the loop's first source."""

    reports_progress: ClassVar[bool] = False

    def __init__(self, queue: EventQueue) -> None:
        self.queue = queue

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        return self.queue.pop_until(now)


class _Watch:
    """The loop's observer: usage samples, completions counted, progress shown."""

    def __init__(
        self, recorder: Recorder, total: int, progress: Callable[[int, int], None] | None
    ) -> None:
        self.recorder = recorder
        self.total = total
        self.progress = progress
        self.done = 0
        self.steps = 0

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        events, actions = cycle.events, cycle.decision.actions
        if actions or any(not isinstance(e, _QUIET) for e in events):
            # else the usage sample would repeat the last one
            self.recorder.record(cycle.now, core, actions)
        self.done += sum(1 for e in events if isinstance(e, m.JobCompleted))
        self.steps += 1
        if self.progress is not None and self.steps % 256 == 0:
            self.progress(self.done, self.total)


class _VirtualClock:
    """Jumps to the next arrival, predicted completion or wakeup; ends the replay when
    every job is done (serving-demand changes after the last completion would only
    stretch the usage denominators), when nothing is left, or past ``max_time_s``."""

    def __init__(
        self, queue: EventQueue, rt: SimRuntime, watch: _Watch, max_time_s: float | None
    ) -> None:
        self.queue, self.rt, self.watch, self.max_time_s = queue, rt, watch, max_time_s

    def next(self, wakeup: float | None) -> float | None:
        t_evt = self.queue.peek_time()
        t_done = self.rt.next_completion()
        candidates = [x for x in (t_evt, t_done, wakeup) if x is not None]
        if not candidates or self.watch.done >= self.watch.total:
            return None
        t = min(candidates)
        if self.max_time_s is not None and t > self.max_time_s:
            return None
        return t
