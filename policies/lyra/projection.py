"""A fluid projection of the running elastic jobs: who finishes when, if nothing new arrives.

Lyra's phase-2 value is a *JCT reduction*, and a job's JCT depends on more than its own
allocation now: jobs grow into the GPUs that others free when they finish. Valuing an
extra worker by the job's running time alone (its remaining steps over its new rate)
ignores that and picks wrongly (the paper's A/B example: it prefers the long job A).
This module projects the future under a *priority fill* — every job keeps its minimum,
the extra GPUs go to jobs in priority order up to their maximum, and the fill is redone
at every completion — which is how the policy itself behaves when no job arrives.

With linear scaling an optimal schedule for the sum of completion times is always such a
priority fill (checked against an exhaustive search over all allocations in
``tests/unit/test_lyra_policy.py``); the policy searches the order and then lets the
multiple-choice knapsack refine the allocation for sub-linear curves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lyra_ray.model import ClusterSnapshot, GpuType, JobView, NodeId

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class FluidJob:
    """A running job as the projection sees it: steps left and steps/s per worker count."""

    remaining: float
    min_workers: int
    max_workers: int
    rates: tuple[float, ...]
    """``rates[w]`` = steps/s with ``w`` workers, for ``w`` in ``0..max_workers``."""
    current: int = 0
    """Workers it runs with now on these GPUs (0: not running here, or restarting in any
    case): any other size costs it a restart."""
    restart_s: float = 0.0
    """What one restart costs it (:mod:`lyra_ray.model.restart_cost`): its completion
    moves that much later when it is resized."""

    def restart_penalty(self, workers: int) -> float:
        """Seconds a size of ``workers`` adds to its completion by restarting it."""
        return self.restart_s if 0 < self.current != workers else 0.0


@dataclass(frozen=True, slots=True)
class Projection:
    finish: tuple[float, ...]
    """Completion time of each job, seconds from now (``inf`` if it cannot progress)."""
    intervals: tuple[tuple[float, float, tuple[int, ...]], ...]
    """``(start, end, workers per job)`` between consecutive completions."""

    @property
    def total(self) -> float:
        return sum(self.finish)


def fluid_job(
    snap: ClusterSnapshot,
    job: JobView,
    t: GpuType,
    pick: tuple[GpuType, int, int],
    gone: frozenset[NodeId],
    price: Callable[[JobView], float],
) -> FluidJob:
    """``job`` as phase 2 projects it on ``t`` (``pick``: type, base, upper); its current
    size where a change would restart it (running on ``t`` alone, none of its servers
    reclaimed), then priced by ``price``."""
    _, base, upper = pick
    rates = (0.0, *(snap.throughput(job, t, w) for w in range(1, upper + 1)))
    cur, now = job.current, 0
    here = cur is not None and not cur.extra and cur.gpu_type == t
    if cur is not None and here and not any(n in gone for n, _ in cur.nodes):
        now = cur.workers
    return FluidJob(job.remaining_steps, base, upper, rates, now, price(job) if now else 0.0)


def release_of(snap: ClusterSnapshot, job: JobView, t: GpuType, workers: int) -> tuple[float, int]:
    """A job phase 2 cannot grow, as the projection sees it: when it frees its GPUs."""
    rate = snap.throughput(job, t, workers)
    return (job.remaining_steps / rate if rate > 0 else float("inf"), workers)


def priority_fill(
    jobs: Sequence[FluidJob], active: Sequence[bool], capacity: int, order: Sequence[int]
) -> tuple[int, ...]:
    """Minimum for every active job, then extras in ``order`` up to each job's maximum."""
    x = [j.min_workers if a else 0 for j, a in zip(jobs, active, strict=True)]
    spare = capacity - sum(x)
    for i in order:
        if spare <= 0:
            break
        if active[i]:
            g = min(spare, jobs[i].max_workers - x[i])
            x[i] += g
            spare -= g
    return tuple(x)


def project(
    jobs: Sequence[FluidJob],
    now_alloc: Sequence[int],
    capacity: int,
    order: Sequence[int],
    releases: Sequence[tuple[float, int]] = (),
) -> Projection:
    """Run ``now_alloc`` until the first event, then priority fills by ``order``.

    ``releases`` are ``(time, gpus)`` freed by jobs outside the projection (rigid jobs:
    their completion does not depend on the order), which the jobs here grow into.
    Keeping rigid jobs out of the job list keeps the projection O(flexible jobs^2).
    """
    n = len(jobs)
    rem = [j.remaining for j in jobs]
    active = [r > _EPS for r in rem]
    finish = [0.0 if not a else float("inf") for a in active]
    pending = sorted(r for r in releases if r[1] > 0)
    x = tuple(now_alloc)
    t = 0.0
    intervals: list[tuple[float, float, tuple[int, ...]]] = []
    k = 0
    while any(active):
        rates = [jobs[i].rates[x[i]] if active[i] else 0.0 for i in range(n)]
        times = [rem[i] / rates[i] for i in range(n) if active[i] and rates[i] > 0]
        if k < len(pending):
            times.append(max(0.0, pending[k][0] - t))
        if not times:
            break
        dt = min(times)
        intervals.append((t, t + dt, x))
        t += dt
        for i in range(n):
            if active[i] and rates[i] > 0:
                rem[i] -= rates[i] * dt
                if rem[i] <= _EPS * max(1.0, jobs[i].remaining) or rem[i] / rates[i] <= _EPS:
                    active[i] = False
                    finish[i] = t
        while k < len(pending) and pending[k][0] <= t + _EPS:
            capacity += pending[k][1]
            k += 1
        x = priority_fill(jobs, active, capacity, order)
    return Projection(finish=tuple(finish), intervals=tuple(intervals))


def own_finish(job: FluidJob, index: int, extra: int, ref: Projection) -> float:
    """Job ``index``'s completion if it runs ``min + extra`` workers now, others as in ``ref``.

    Now it runs exactly ``min + extra`` workers; along ``ref``'s later intervals at least
    that many (and at least what the reference gave it then: it still grows into freed
    GPUs); once its
    reference life is over it keeps the last size it had, and after every other job is
    done it runs at its maximum. This is the job's best response to the others' plan —
    cheap (one pass) and exact when the job's change does not move anyone else.
    """
    rem = job.remaining
    floor = min(job.max_workers, job.min_workers + extra)
    t = 0.0
    last = floor
    for k, (start, end, alloc) in enumerate(ref.intervals):
        w = alloc[index]
        # Now: exactly the workers being valued; later: grow into what the reference gave.
        w = floor if k == 0 else (max(w, floor) if w > 0 else last)
        last = w
        rate = job.rates[w]
        dt = end - start
        if rate * dt >= rem - _EPS:
            return start + rem / rate if rate > 0 else float("inf")
        rem -= rate * dt
        t = end
    rate = job.rates[job.max_workers]
    return t + rem / rate if rate > 0 else float("inf")
