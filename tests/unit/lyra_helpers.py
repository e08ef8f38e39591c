"""Builders and a tiny exact evaluator for the Lyra policy tests (no simulator needed).

The evaluator is the fluid model of the paper's examples: linear scaling, no resize
cost, allocations change only when a job finishes (no arrivals). ``optimum`` searches
every work-conserving allocation at every completion (exhaustive dynamic programming);
``drive`` runs a policy in the same model, calling it after every completion.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

from lyra_ray.model import (
    Allocation,
    Assignment,
    ClusterSnapshot,
    JobSpec,
    JobStatus,
    JobView,
    Node,
    ThroughputModel,
)
from lyra_ray.policies.base import Policy

EPS = 1e-9


def view(
    name: str, remaining: float, lo: int, hi: int, workers: int = 0, gpu: str = "v100"
) -> JobView:
    spec = JobSpec(
        name=name, total_steps=remaining, min_workers=lo, max_workers=hi, throughput={gpu: 1.0}
    )
    cur = Assignment(gpu, workers) if workers else None
    return JobView(
        id=name,
        spec=spec,
        arrival_s=0.0,
        status=JobStatus.RUNNING if workers else JobStatus.QUEUED,
        steps_done=0.0,
        attained_service_s=0.0,
        time_received_s={},
        throughput={gpu: lo},
        current=cur,
    )


def snapshot(jobs: Sequence[JobView], capacity: int, gpu: str = "v100") -> ClusterSnapshot:
    return ClusterSnapshot(
        now=0.0,
        nodes=(Node("n0", gpu, capacity),),
        jobs=tuple(jobs),
        throughput_model=ThroughputModel(),
    )


def _advance(rem: tuple[float, ...], x: Sequence[int]) -> tuple[float, int, tuple[float, ...]]:
    act = [i for i, r in enumerate(rem) if r > EPS]
    dt = min(rem[i] / x[i] for i in act)
    new = tuple(0.0 if r <= EPS else max(0.0, r - x[i] * dt) for i, r in enumerate(rem))
    return dt, len(act), tuple(0.0 if v < 1e-7 else round(v, 9) for v in new)


def _allocs(
    rem: tuple[float, ...], lo: Sequence[int], hi: Sequence[int], cap: int
) -> list[tuple[int, ...]]:
    act = [i for i, r in enumerate(rem) if r > EPS]
    total = min(cap, sum(hi[i] for i in act))
    out = []
    for combo in itertools.product(*(range(lo[i], hi[i] + 1) for i in act)):
        if sum(combo) == total:
            x = [0] * len(rem)
            for i, w in zip(act, combo, strict=True):
                x[i] = w
            out.append(tuple(x))
    return out


def optimum(rem: Sequence[float], lo: Sequence[int], hi: Sequence[int], cap: int) -> float:
    """Lowest sum of JCTs over all allocation sequences (re-decided at each completion)."""

    @functools.cache
    def best(r: tuple[float, ...]) -> float:
        if all(v <= EPS for v in r):
            return 0.0
        out = float("inf")
        for x in _allocs(r, lo, hi, cap):
            dt, n, nxt = _advance(r, x)
            out = min(out, dt * n + best(nxt))
        return out

    return best(tuple(float(v) for v in rem))


def with_start(
    rem: Sequence[float], start: Sequence[int], hi: Sequence[int], cap: int
) -> list[float]:
    """JCTs when ``start`` runs until the first completion, then the survivors grow."""
    r = tuple(float(v) for v in rem)
    x = tuple(start)
    t, done = 0.0, [0.0] * len(r)
    while any(v > EPS for v in r):
        dt, _, nxt = _advance(r, x)
        t += dt
        for i, (a, b) in enumerate(zip(r, nxt, strict=True)):
            if a > EPS and b <= EPS:
                done[i] = t
        r = nxt
        left = cap - sum(x[i] for i in range(len(r)) if r[i] > EPS)
        grown = list(x)
        for i in range(len(r)):
            grown[i] = 0 if r[i] <= EPS else x[i]
        for i in range(len(r)):
            if r[i] > EPS:
                g = min(left, hi[i] - grown[i])
                grown[i] += g
                left -= g
        x = tuple(grown)
    return done


def drive(
    policy: Policy, rem: Sequence[float], lo: Sequence[int], hi: Sequence[int], cap: int
) -> tuple[float, list[Allocation]]:
    """Sum of JCTs when ``policy`` re-allocates after every completion."""
    names = [f"j{i}" for i in range(len(rem))]
    r = tuple(float(v) for v in rem)
    total, cur, seen = 0.0, [0] * len(r), []
    while any(v > EPS for v in r):
        jobs = [view(names[i], r[i], lo[i], hi[i], cur[i]) for i in range(len(r)) if r[i] > EPS]
        alloc = policy.allocate(snapshot(jobs, cap))
        seen.append(alloc)
        x = [alloc.workers[names[i]][1] if r[i] > EPS else 0 for i in range(len(r))]
        assert sum(x) <= cap
        for i in range(len(r)):
            if r[i] > EPS:
                assert lo[i] <= x[i] <= hi[i]
        dt, n, r = _advance(r, x)
        total += dt * n
        cur = x
    return total, seen
