"""Phase 3: flexible workers on another GPU type, from the GPUs phases 1 and 2 left idle.

Phases 1 and 2 place every job on one GPU type. What they leave idle on a type — loaned
T4s while the V100s are full, or V100s in a trough while jobs still run on loaned T4s —
can still speed up elastic jobs based on another type: their flexible workers may sit
there while their base stays put (:attr:`lyra_ray.model.Assignment.extra`). Such a
job's rate is :func:`lyra_ray.model.mixed.mixed_throughput` (per-worker batches in
proportion to speed, two-server scaling), which often says a slow worker on another
server does not pay; then nothing is added.

Per type with idle GPUs, a multiple-choice knapsack (:mod:`lyra_ray.policies.lyra.mckp`): one
group per elastic job with room below its maximum, item ``k`` = k workers of that type,
value = the seconds they take off the job's remaining running time. Each change of a
job's workers costs it a checkpoint and restart (its price by the restart model), so an item that
changes what the job holds now is worth that much less, and keeping what it holds is
worth that much more than dropping it: flexible workers do not churn for a few seconds'
gain, and a knapsack that finds nothing better leaves them where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView
from lyra_ray.model.mixed import can_mix, mixed_throughput
from lyra_ray.policies.lyra import mckp

Parts = tuple[tuple[GpuType, int], ...]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted elastic job: its base type, workers there and its ceiling in all."""

    job: JobView
    gpu_type: GpuType
    workers: int
    upper: int


def current_extra(job: JobView, gpu_type: GpuType) -> int:
    """Workers ``job`` holds now on ``gpu_type`` as flexible workers of another base."""
    cur = job.current
    if cur is None or not cur.extra:
        return 0
    return sum(w for g, w in cur.extra if g == gpu_type)


def _restarts_anyway(c: Candidate) -> bool:
    """Whether phases 1-2 already resize the job (so changing its extras is free)."""
    cur = c.job.current
    if cur is None:
        return True
    return cur.gpu_type != c.gpu_type or cur.parts[0][1] != c.workers


def add_extras(
    snap: ClusterSnapshot,
    candidates: Sequence[Candidate],
    free: dict[GpuType, int],
    price: Callable[[JobView], float],
) -> dict[JobId, Parts]:
    """Flexible workers on other types for ``candidates`` (``free`` is reduced);
    ``price``: what one restart costs a job (:mod:`lyra_ray.model.restart_cost`)."""
    model = snap.throughput_model
    extras: dict[JobId, dict[GpuType, int]] = {}
    for t in sorted(g for g, n in free.items() if n > 0):
        group_jobs: list[Candidate] = []
        groups: list[list[mckp.Item]] = []
        for c in candidates:
            spec = c.job.spec
            held = extras.get(c.job.id, {})
            room = c.upper - c.workers - sum(held.values())
            if c.gpu_type == t or room <= 0 or not can_mix(spec):
                continue
            if model.throughput(spec, t, 1) <= 0:
                continue
            parts = ((c.gpu_type, c.workers), *sorted(held.items()))
            before = mixed_throughput(model, spec, parts)
            if before <= 0:
                continue
            rem = c.job.remaining_steps
            now_k = current_extra(c.job, t)
            switch = 0.0 if _restarts_anyway(c) else price(c.job)
            # Value relative to "take nothing": dropping held workers costs a restart too.
            base = -switch if now_k else 0.0
            items: list[mckp.Item] = []
            for k in range(1, min(room, free[t]) + 1):
                after = mixed_throughput(model, spec, (*parts, (t, k)))
                if after <= before:
                    continue
                gain = rem / before - rem / after - (0.0 if k == now_k else switch) - base
                if gain > 0:
                    items.append((k, gain))
            if items:
                group_jobs.append(c)
                groups.append(items)
        if not groups:
            continue
        sol = mckp.solve(groups, free[t])
        for c, items, pick in zip(group_jobs, groups, sol.choice, strict=True):
            if pick is not None:
                k = items[pick][0]
                extras.setdefault(c.job.id, {})[t] = k
                free[t] -= k
    return {j: tuple(sorted(parts.items())) for j, parts in extras.items() if parts}


def flexible_only(
    snap: ClusterSnapshot, lend: frozenset[str], workers: Mapping[JobId, tuple[GpuType, int]]
) -> tuple[frozenset[str], frozenset[str]]:
    """(lent servers holding some job's base now, lent servers holding none).

    Bases are packed onto the first kind and flexible workers onto the second, so that
    a reclaim finds servers whose loss only scales jobs in.
    """
    bases: set[str] = set()
    types = {n.id: n.gpu_type for n in snap.nodes}
    for j in snap.active_jobs:
        cur = j.current
        if cur is None or j.id not in workers:
            continue
        for n, _ in cur.nodes:
            if n in lend and types.get(n) == cur.gpu_type:
                bases.add(n)
    return frozenset(bases), frozenset(lend - bases)
