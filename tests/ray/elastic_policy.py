"""A small elastic policy for the live resize test, loaded by ``"module:Class"``.

Rigid jobs first (arrival order, current jobs keep their type), then each elastic job
gets its minimum plus whatever is left on its GPU type, up to its maximum. With a rigid
job beside it an elastic job runs small; when the rigid job ends it grows; when a new
rigid job arrives it shrinks again — a deterministic 2 -> 4 -> 2 for the test.
"""

from __future__ import annotations

from typing import ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobView
from lyra_ray.policies.base import PolicyBase


class GreedyElastic(PolicyBase):
    name: ClassVar[str] = "greedy_elastic_test"

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        free = dict(snap.gpus_by_type())
        out: dict[JobId, tuple[GpuType, int]] = {}
        jobs = sorted(snap.active_jobs, key=lambda j: (j.arrival_s, j.id))
        rigid = [j for j in jobs if not j.spec.elastic]
        elastic = [j for j in jobs if j.spec.elastic]
        for j in rigid + elastic:
            g = self._type(j, snap, free)
            if g is not None:
                out[j.id] = (g, j.spec.min_workers)
                free[g] -= j.spec.min_workers
        for j in elastic:
            if j.id in out:
                g, n = out[j.id]
                extra = min(free[g], j.spec.max_workers - n)
                out[j.id] = (g, n + extra)
                free[g] -= extra
        return Allocation(workers=out)

    @staticmethod
    def _type(j: JobView, snap: ClusterSnapshot, free: dict[GpuType, int]) -> GpuType | None:
        order = sorted(free, key=lambda g: -snap.throughput(j, g))
        if j.current is not None:
            order.insert(0, j.current.gpu_type)
        for g in order:
            if free.get(g, 0) >= j.spec.min_workers and snap.throughput(j, g) > 0:
                return g
        return None
