"""Heterogeneity-agnostic, non-preemptive FIFO: the simplest policy that proves the loop.

Jobs are considered in arrival order; each takes the first GPU type (largest pool first,
then by name — throughput is never looked at) with enough free GPUs for its minimum
size, and keeps them until it finishes. A job that does not fit is skipped, not waited
for (first-fit), so one large job does not idle the whole cluster. Elastic jobs run at
their minimum. Gavel's round-based ``fifo`` lives in :mod:`lyra_ray.policies.gavel`.
Under teams' quotas (a strict ``team_bounds``) every grant, a running job's included, is
also checked against its team's bounds: a borrower whose GPUs a lender's guarantee now
needs is not kept.
"""

from __future__ import annotations

from typing import ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId
from lyra_ray.model.team_bounds import ledger_of
from lyra_ray.policies.base import PolicyBase, register


@register
class FifoNonPreemptive(PolicyBase):
    name: ClassVar[str] = "fifo_nonpreemptive"

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        capacity = snap.gpus_by_type()
        order = sorted(capacity, key=lambda g: (-capacity[g], g))
        free = dict(capacity)
        out: dict[JobId, tuple[GpuType, int]] = {}
        jobs = sorted(snap.active_jobs, key=lambda j: (j.arrival_s, j.id))
        ledger = ledger_of(snap.team_bounds)
        for j in jobs:  # running jobs keep what they have
            c = j.current
            if c is not None and free.get(c.gpu_type, 0) >= c.workers:
                if ledger is not None:
                    if not ledger.fits(j.id, c.gpu_type, c.workers):
                        continue
                    ledger.take(j.id, c.gpu_type, c.workers)
                out[j.id] = (c.gpu_type, c.workers)
                free[c.gpu_type] -= c.workers
        for j in jobs:
            if j.id in out:
                continue
            need = j.spec.min_workers
            for g in order:
                if free[g] >= need and snap.throughput(j, g) > 0:
                    if ledger is not None:
                        if not ledger.fits(j.id, g, need):
                            continue
                        ledger.take(j.id, g, need)
                    out[j.id] = (g, need)
                    free[g] -= need
                    break
        return Allocation(workers=out)
