"""Phase 2: share the GPUs left after base demand among running elastic jobs.

The objective is the sum of the jobs' completion times (mean JCT). Two steps:

1. *Priority fill.* Every job keeps its minimum; the spare GPUs go to jobs in a priority
   order, each up to its maximum. With linear scaling the optimum is always such a fill
   (see :mod:`lyra_ray.policies.lyra.projection`), but not always the shortest-job-first one: a job
   held back by its own maximum cannot use GPUs that free up later, so delaying it costs
   more than its size suggests. Small sets (``<= search_limit`` jobs) try every order;
   larger ones start from shortest-remaining-work-first and swap neighbours while that
   improves the projected total.
2. *Multiple-choice knapsack.* One group per job, item "k extra workers" with weight k and
   value = the reduction in the job's projected JCT (:func:`projection.own_finish`: the
   job grows into GPUs others free, as in the best fill). The MCKP's answer replaces the
   fill only if the projection says it lowers the total — which it does for sub-linear
   or non-concave measured curves, where splitting GPUs beats a strict priority.

Every candidate is charged its restarts: a running job given another size than it runs
at restarts (checkpoint, stop, relaunch: :mod:`lyra_ray.model.restart_cost`), which
moves its completion later by its restart price (``FluidJob.restart_s``). So the fill,
the knapsack's items and the final comparison all count them, and keeping every job at
its current size (no restart at all) is itself a candidate: a job with a large
checkpoint is resized only for a gain above its price.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from lyra_ray.policies.lyra import mckp
from lyra_ray.policies.lyra.projection import FluidJob, own_finish, priority_fill, project

_IMPROVE = 1e-9


Releases = Sequence[tuple[float, int]]


def _order_cost(
    jobs: Sequence[FluidJob], capacity: int, order: Sequence[int], releases: Releases = ()
) -> float:
    x = priority_fill(jobs, [True] * len(jobs), capacity, order)
    return project(jobs, x, capacity, order, releases).total


def best_order(
    jobs: Sequence[FluidJob], capacity: int, search_limit: int = 6, releases: Releases = ()
) -> tuple[int, ...]:
    """The priority order whose fill has the lowest projected sum of completion times."""
    n = len(jobs)

    def work(i: int) -> float:
        one = jobs[i].rates[1] if len(jobs[i].rates) > 1 else 0.0
        return jobs[i].remaining / one if one > 0 else float("inf")

    # Rigid jobs (min == max) take no extras: their place in the order is irrelevant, but
    # they stay in the projection because the GPUs they free let the others grow.
    flex = sorted(
        (i for i in range(n) if jobs[i].max_workers > jobs[i].min_workers),
        key=lambda i: (work(i), i),
    )
    rigid = tuple(i for i in range(n) if jobs[i].max_workers <= jobs[i].min_workers)
    srpt = (*flex, *rigid)
    if len(flex) <= 1:
        return srpt
    if len(flex) <= search_limit:
        return min(
            (((*o, *rigid)) for o in itertools.permutations(flex)),
            key=lambda o: _order_cost(jobs, capacity, o, releases),
        )
    order = list(srpt)
    cost = _order_cost(jobs, capacity, order, releases)
    for _ in range(2):  # a couple of neighbour-swap passes: enough in practice, bounded
        improved = False
        for k in range(len(flex) - 1):
            cand = order[:]
            cand[k], cand[k + 1] = cand[k + 1], cand[k]
            c = _order_cost(jobs, capacity, cand, releases)
            if c < cost - _IMPROVE:
                order, cost, improved = cand, c, True
        if not improved:
            break
    return tuple(order)


def restart_penalty(jobs: Sequence[FluidJob], alloc: Sequence[int]) -> float:
    """Seconds of completion the restarts of ``alloc`` add (each resized running job)."""
    return sum(j.restart_penalty(x) for j, x in zip(jobs, alloc, strict=True))


def _cost(
    jobs: Sequence[FluidJob],
    alloc: Sequence[int],
    capacity: int,
    order: Sequence[int],
    releases: Releases,
) -> float:
    return project(jobs, alloc, capacity, order, releases).total + restart_penalty(jobs, alloc)


def knapsack_values(
    jobs: Sequence[FluidJob],
    ref_alloc: Sequence[int],
    capacity: int,
    order: Sequence[int],
    releases: Releases = (),
) -> list[list[mckp.Item]]:
    """MCKP groups: per job, items (k, JCT reduction of k extra workers vs. none, less
    the restart the change costs and plus the one it spares)."""
    ref = project(jobs, ref_alloc, capacity, order, releases)
    groups: list[list[mckp.Item]] = []
    for i, job in enumerate(jobs):
        base = own_finish(job, i, 0, ref) + job.restart_penalty(job.min_workers)
        items: list[mckp.Item] = []
        for k in range(1, job.max_workers - job.min_workers + 1):
            gain = base - own_finish(job, i, k, ref) - job.restart_penalty(job.min_workers + k)
            if gain > 0:
                items.append((k, gain))
        groups.append(items)
    return groups


def share_spare(
    jobs: Sequence[FluidJob],
    capacity: int,
    search_limit: int = 6,
    rounds: int = 2,
    releases: Releases = (),
) -> tuple[int, ...]:
    """Workers per job (each within [min, max], sum <= capacity) for the lowest mean JCT."""
    if not jobs:
        return ()
    order = best_order(jobs, capacity, search_limit, releases)
    best = priority_fill(jobs, [True] * len(jobs), capacity, order)
    best_cost = _cost(jobs, best, capacity, order, releases)
    keep = tuple(
        j.current if j.min_workers <= j.current <= j.max_workers else j.min_workers for j in jobs
    )
    if keep != best and sum(keep) <= capacity:
        c = _cost(jobs, keep, capacity, order, releases)
        if c < best_cost - _IMPROVE * max(1.0, best_cost):
            best, best_cost = keep, c
    spare = capacity - sum(j.min_workers for j in jobs)
    for _ in range(rounds):
        groups = knapsack_values(jobs, best, capacity, order, releases)
        sol = mckp.solve(groups, spare)
        cand = tuple(
            j.min_workers + (0 if c is None else groups[i][c][0])
            for i, (j, c) in enumerate(zip(jobs, sol.choice, strict=True))
        )
        cost = _cost(jobs, cand, capacity, order, releases)
        if cost >= best_cost - _IMPROVE * max(1.0, best_cost):
            break
        best, best_cost = cand, cost
    return best


def greedy_spare(jobs: Sequence[FluidJob], capacity: int) -> tuple[int, ...]:
    """The *Basic* scenario's elasticity: spare GPUs to jobs in the given order, to max."""
    return priority_fill(jobs, [True] * len(jobs), capacity, range(len(jobs)))
