"""Lyra's reclaim knapsack with dependent item values: which lent servers to give back.

When inference needs servers back, every reclaimed server costs the training jobs on it
either a scale-in (the job keeps at least its minimum elsewhere) or a preemption. Lyra
values a server by how much of the running jobs it holds: the sum, over the jobs on it,
of ``1 / (number of servers the job spans)``. A server that is one of many for each of
its jobs is cheap; a server that holds a whole job is dear. The values are *dependent*:
once a server is taken, its jobs span fewer servers (or were preempted and span none),
so the remaining values change. Lyra therefore picks greedily: take the cheapest
server, apply the scale-in/preemption, recompute, repeat.

*Cheapest* puts preemptions first: a server whose reclaim preempts fewer jobs always
goes before one that preempts more, whatever their values, and the value orders
servers that preempt equally. So a reclaim that removing flexible workers (scale-ins)
can meet never preempts a job's base; the value then still prefers the server that
touches least of the running jobs. Ordering by value alone could pick a server holding
one whole single-server job (value 1) before one holding slices of three jobs that
each keep their minimum elsewhere (value 1.5), preempting a job for nothing. On the
paper's example the two orders agree (``tests/unit/test_reclaim.py``).

*Priced by restarts.* Every job a reclaim touches pays a restart, shrunk or preempted
(:mod:`lyra_ray.model.restart_cost`), and a job with a large checkpoint pays more.
Given ``prices`` (seconds per job), a job's share of a server is weighted by its
price: among servers that preempt equally many jobs, the one whose jobs restart
cheapest goes first. Equal prices give the paper's order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from lyra_ray.model import JobId, NodeId


@dataclass(frozen=True, slots=True)
class JobFootprint:
    """Where a running job sits: GPUs per node, and the fewest workers it can run with."""

    job_id: JobId
    gpus_on: Mapping[NodeId, int]
    min_workers: int

    @property
    def workers(self) -> int:
        return sum(self.gpus_on.values())


@dataclass(frozen=True, slots=True)
class ReclaimStep:
    """One greedy pick: the server, its value when picked, and what happened to its jobs."""

    node_id: NodeId
    value: float
    values_before: Mapping[NodeId, float]
    shrunk: tuple[JobId, ...]
    preempted: tuple[JobId, ...]


@dataclass(frozen=True, slots=True)
class ReclaimPlan:
    steps: tuple[ReclaimStep, ...]
    workers_left: Mapping[JobId, int]
    """Workers each touched job keeps (0 = preempted)."""
    preempted: frozenset[JobId] = field(default_factory=frozenset)

    @property
    def order(self) -> tuple[NodeId, ...]:
        return tuple(s.node_id for s in self.steps)


def server_values(
    candidates: Collection[NodeId],
    jobs: Sequence[JobFootprint],
    prices: Mapping[JobId, float] | None = None,
) -> dict[NodeId, float]:
    """Each candidate server's value: sum over its jobs of 1 / servers the job spans
    (times the job's restart price, relative to the mean, when ``prices`` are given)."""
    values = {n: 0.0 for n in candidates}
    mean = sum(prices.values()) / len(prices) if prices else 0.0
    for job in jobs:
        span = [n for n, g in job.gpus_on.items() if g > 0]
        if not span:
            continue
        share = 1.0 / len(span)
        if prices and mean > 0:
            share *= prices.get(job.job_id, mean) / mean
        for n in span:
            if n in values:
                values[n] += share
    return values


def plan_reclaim(
    candidates: Collection[NodeId],
    jobs: Sequence[JobFootprint],
    count: int,
    prices: Mapping[JobId, float] | None = None,
) -> ReclaimPlan:
    """Pick ``count`` servers among ``candidates`` (lent servers) by Lyra's greedy knapsack.

    The server whose reclaim preempts the fewest jobs goes first, then the lowest value,
    then the node id, so the plan is deterministic (see the module doc); ``prices``
    weigh each job's share by its restart price. A job that
    would drop below ``min_workers`` is preempted and leaves every server it was on;
    otherwise it is scaled in.
    """
    if count > len(candidates):
        raise ValueError(f"cannot reclaim {count} of {len(candidates)} lent servers")
    live: dict[JobId, dict[NodeId, int]] = {
        j.job_id: {n: g for n, g in j.gpus_on.items() if g > 0} for j in jobs
    }
    mins = {j.job_id: j.min_workers for j in jobs}
    left = set(candidates)
    steps: list[ReclaimStep] = []
    preempted: set[JobId] = set()
    for _ in range(count):
        footprints = [JobFootprint(j, g, mins[j]) for j, g in live.items() if g]
        values = server_values(left, footprints, prices)

        def cost(
            n: NodeId, fps: list[JobFootprint] = footprints, vals: dict[NodeId, float] = values
        ) -> tuple[int, float, str]:
            pre = sum(1 for f in fps if n in f.gpus_on and f.workers - f.gpus_on[n] < f.min_workers)
            return (pre, round(vals[n], 9), n)

        pick = min(left, key=cost)
        shrunk: list[JobId] = []
        gone: list[JobId] = []
        for job_id, gpus in sorted(live.items()):
            if pick not in gpus:
                continue
            if sum(gpus.values()) - gpus[pick] >= mins[job_id]:
                del gpus[pick]
                shrunk.append(job_id)
            else:
                gpus.clear()
                gone.append(job_id)
                preempted.add(job_id)
        steps.append(ReclaimStep(pick, values[pick], dict(values), tuple(shrunk), tuple(gone)))
        left.discard(pick)
    touched = {j for s in steps for j in (*s.shrunk, *s.preempted)}
    return ReclaimPlan(
        steps=tuple(steps),
        workers_left={j: sum(live[j].values()) for j in sorted(touched)},
        preempted=frozenset(preempted),
    )


def naive_reclaim(candidates: Collection[NodeId], count: int) -> tuple[NodeId, ...]:
    """The "Basic" scenario's reclaim: the first ``count`` lent servers by id, blind to jobs."""
    return tuple(sorted(candidates)[:count])
