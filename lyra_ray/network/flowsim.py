"""The fluid simulation: flows and computations run to completion under a scheduler.

Rates are piecewise constant: they change only when a flow starts or ends, so the loop
jumps from event to event (a release, a computation's end, the next flow to drain) and
asks the scheduler for new rates only when the set of active flows changed. Between
events every flow drains at its rate; the schedule is exact for the fluid model, so a
hand-computed example (EchelonFlow's pipeline) comes out to the last bit.

The scheduler sees a :class:`FlowView`: the active flows, the links they cross (only
those; the rest of the fabric is idle), what each flow has left and has sent, and each
EchelonFlow's reference time so far (the largest ``finish - offset`` of its finished
flows, which is also the EchelonFlow's completion time once all its flows are done).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lyra_ray.network.fairness import Array
from lyra_ray.network.flows import Compute, Flow, Task, check_workload
from lyra_ray.network.topology import Topology

_DONE_REL = 1e-9
"""A flow with less than this fraction of its size left counts as done (float dust)."""


@dataclass(frozen=True, slots=True)
class FlowView:
    now: float
    flows: tuple[Flow, ...]
    incidence: Array
    """Links x active flows, over the links some active flow crosses."""
    capacity: Array
    remaining: Array
    sent: Array
    weight: Array
    echelon_ref: Mapping[str, float]


class FlowScheduler(Protocol):
    """Turns the active flows into rates (bytes/s), one per flow, within link capacity."""

    name: str

    def rates(self, view: FlowView) -> Array: ...


@dataclass
class FlowSimResult:
    start: dict[str, float]
    finish: dict[str, float]
    echelon_completion: dict[str, float]
    """Per EchelonFlow: the largest ``finish - offset`` over its flows."""
    coflow_span: dict[str, tuple[float, float]]
    """Per Coflow: (first start, last finish) of its flows."""
    jobs: dict[str, float] = field(default_factory=dict)
    """Per job: its last task's finish time."""
    events: int = 0
    scheduler_calls: int = 0

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=0.0)


def simulate(tasks: Iterable[Task], topology: Topology, scheduler: FlowScheduler) -> FlowSimResult:
    """Run every task to completion; raises ``RuntimeError`` if the scheduler starves
    every active flow while nothing else can happen (a scheduler bug, never a workload's)."""
    by_name = check_workload(tasks)
    users: dict[str, list[str]] = {}
    waiting = {n: len(t.deps) for n, t in by_name.items()}
    for t in by_name.values():
        for d in t.deps:
            users.setdefault(d, []).append(t.name)
    ready: list[tuple[float, int, str]] = []
    computing: list[tuple[float, int, str]] = []
    seq = 0
    for n, t in by_name.items():
        if not t.deps:
            heapq.heappush(ready, (t.release, seq, n))
            seq += 1
    res = FlowSimResult({}, {}, {}, {})
    active: list[Flow] = []
    paths: list[tuple[int, ...]] = []
    rem = np.zeros(0)
    size = np.zeros(0)
    rate = np.zeros(0)
    now = 0.0
    changed = False

    def finish(name: str, t: float) -> None:
        nonlocal seq
        res.finish[name] = t
        task = by_name[name]
        if task.job:
            res.jobs[task.job] = max(res.jobs.get(task.job, 0.0), t)
        if isinstance(task, Flow):
            if task.echelon:
                ref = res.echelon_completion.get(task.echelon, -math.inf)
                res.echelon_completion[task.echelon] = max(ref, t - task.offset)
            if task.coflow:
                a, b = res.coflow_span.get(task.coflow, (res.start[name], t))
                res.coflow_span[task.coflow] = (min(a, res.start[name]), max(b, t))
        for u in users.get(name, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (max(by_name[u].release, t), seq, u))
                seq += 1

    while True:
        # Start what is due and finish zero-length work, until nothing more happens now.
        progressed = True
        while progressed:
            progressed = False
            while ready and ready[0][0] <= now:
                _, _, n = heapq.heappop(ready)
                res.start[n] = now
                task = by_name[n]
                progressed = True
                if isinstance(task, Compute):
                    if task.duration == 0.0:
                        finish(n, now)
                    else:
                        heapq.heappush(computing, (now + task.duration, seq, n))
                        seq += 1
                elif task.size == 0.0:
                    finish(n, now)
                else:
                    active.append(task)
                    paths.append(topology.path(task.src, task.dst))
                    rem = np.append(rem, task.size)
                    size = np.append(size, task.size)
                    changed = True
            while computing and computing[0][0] <= now:
                _, _, n = heapq.heappop(computing)
                finish(n, now)
                progressed = True
        if changed:
            rate = _rates(scheduler, active, paths, rem, size, now, topology, res)
            changed = False
        t_next = math.inf
        if ready:
            t_next = ready[0][0]
        if computing:
            t_next = min(t_next, computing[0][0])
        moving = rate > 0
        t_flow = math.inf
        if moving.any():
            drain = rem[moving] / rate[moving]
            first = float(np.min(drain))
            t_flow = now + first
            t_next = min(t_next, t_flow)
        if t_next == math.inf:
            if active or len(res.finish) < len(by_name):
                raise RuntimeError(
                    f"{scheduler.name}: stalled at t={now} with {len(active)} flows at rate 0"
                )
            break
        res.events += 1
        if active:
            done = np.zeros(len(active), dtype=bool)
            if t_flow <= t_next:  # the flows that set this event drain now, float dust or not
                done[moving] = drain <= first * (1.0 + _DONE_REL)
            rem = rem - rate * (t_next - now)
            done |= rem <= _DONE_REL * size
        now = t_next
        if active and done.any():
            keep = ~done
            for i in np.flatnonzero(done):
                finish(active[i].name, now)
            active = [f for f, k in zip(active, keep, strict=True) if k]
            paths = [p for p, k in zip(paths, keep, strict=True) if k]
            rem, size, rate = rem[keep], size[keep], rate[keep]
            changed = True
    return res


def _rates(
    scheduler: FlowScheduler,
    active: list[Flow],
    paths: list[tuple[int, ...]],
    rem: Array,
    size: Array,
    now: float,
    topology: Topology,
    res: FlowSimResult,
) -> Array:
    res.scheduler_calls += 1
    if not active:
        return np.zeros(0)
    rows = np.fromiter((link for p in paths for link in p), dtype=np.int64)
    cols = np.repeat(np.arange(len(active)), [len(p) for p in paths])
    links, local_rows = np.unique(rows, return_inverse=True)
    incidence = np.zeros((len(links), len(active)))
    np.add.at(incidence, (local_rows, cols), 1.0)
    view = FlowView(
        now,
        tuple(active),
        incidence,
        topology.capacity[links],
        rem,
        size - rem,
        np.fromiter((f.weight for f in active), dtype=np.float64, count=len(active)),
        res.echelon_completion,
    )
    out = np.asarray(scheduler.rates(view), dtype=np.float64)
    if out.shape != (len(active),) or np.any(out < 0) or not np.all(np.isfinite(out)):
        raise RuntimeError(f"{scheduler.name}: rates must be finite, >= 0, one per flow")
    return out
