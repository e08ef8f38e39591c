"""Which nodes each job's workers should go to first (the placer's preference lists).

Elastic jobs: lent servers first, so that a reclaim is usually a scale-in; rigid jobs:
training servers, so that a reclaim does not preempt them. With flexible workers on
other types, lent servers are split: a job's base on a lent type goes first to lent
servers that already hold bases, its flexible workers on another type to lent servers
that hold none. Bases then stay packed on few servers and a reclaim finds servers whose
loss only scales jobs in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView, NodeId
from lyra_ray.policies.lyra.cross_type import flexible_only


def preferred_nodes(
    snap: ClusterSnapshot,
    workers: Mapping[JobId, tuple[GpuType, int]],
    lend: frozenset[NodeId],
    extra: Mapping[JobId, tuple[tuple[GpuType, int], ...]],
    is_elastic: Callable[[JobView], bool],
) -> dict[JobId, tuple[NodeId, ...]]:
    """Each job's preferred nodes, in order; ``is_elastic``: whether the policy runs the
    job elastically (lent servers first) or not (training servers first)."""
    out: dict[JobId, tuple[NodeId, ...]] = {}
    by_type: dict[GpuType, list[NodeId]] = {}
    for n in snap.nodes:
        by_type.setdefault(n.gpu_type, []).append(n.id)
    pool = {n.id: n.pool for n in snap.nodes}
    by_id = {j.id: j for j in snap.jobs}
    bases, flex_only = flexible_only(snap, lend, workers) if extra else (lend, lend)
    for j, (t, _) in sorted(workers.items()):
        elastic = is_elastic(by_id[j])
        usable = [n for n in by_type.get(t, []) if pool[n] == "training" or n in lend]
        # Elastic: lent servers; rigid: training servers. The placer takes the best fit
        # among these first and any other usable server only after them.
        pref = [n for n in sorted(usable) if (n in lend) == elastic]
        if extra and elastic and any(n in bases for n in pref):
            pref = [n for n in pref if n in bases]
        for g, _ in extra.get(j, ()):
            pref += sorted(n for n in by_type.get(g, []) if n in flex_only)
        out[j] = tuple(pref)
    return out
