"""Gavel's FIFO: arrival order, ``fifo`` (random type) and ``fifo_perf`` (fastest type).

Queued jobs, in arrival order, take a GPU type with enough unallocated GPUs — a random
one (seeded) for ``fifo``, the fastest for this job for ``fifo_perf`` — and the queue
stops at the first job that fits nowhere (no job jumps ahead). As in Gavel, ``fifo``
keeps a job on the type it was given until it finishes, while ``fifo_perf`` re-ranks
from scratch on every recomputation. The answer is X = 1 on the chosen type, realised
by the round mechanism like every Gavel policy, which (Gavel's rule for FIFO) never
runs a zero-priority job on idle GPUs: ``round_skip_zero_priority``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId
from policies.base import PolicyBase, register


@register
class FifoPerf(PolicyBase):
    name: ClassVar[str] = "fifo_perf"
    agnostic: ClassVar[bool] = False
    round_skip_zero_priority: ClassVar[bool] = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._kept: dict[JobId, GpuType] = {}

    def to_state(self) -> dict[str, Any]:
        """The GPU type each job was given: ``fifo`` keeps a job there until it ends."""
        return {"kept": dict(sorted(self._kept.items()))}

    def load_state(self, state: Mapping[str, Any]) -> None:
        kept = state.get("kept", {})
        self._kept = {str(j): str(g) for j, g in kept.items()}

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        free = dict(snap.gpus_by_type())
        chosen: dict[JobId, GpuType] = {}
        jobs = sorted(snap.active_jobs, key=lambda j: (j.arrival_s, j.id))
        if self.agnostic:  # keep earlier decisions of still-active jobs
            for job in jobs:
                gt = self._kept.get(job.id)
                if gt is not None and free.get(gt, 0) >= max(1, job.spec.min_workers):
                    chosen[job.id] = gt
                    free[gt] -= max(1, job.spec.min_workers)
        for job in jobs:
            if job.id in chosen:
                continue
            sf = max(1, job.spec.min_workers)
            fits = sorted(g for g, c in free.items() if c >= sf and snap.throughput(job, g) > 0)
            if not fits:
                break
            if self.agnostic:
                gt = fits[random.Random(f"{self.seed}:{job.id}").randrange(len(fits))]
            else:
                gt = max(fits, key=lambda g: (snap.throughput(job, g), g))
            chosen[job.id] = gt
            free[gt] -= sf
        self._kept = dict(chosen)
        types = snap.gpus_by_type()
        return Allocation(
            fractions={
                j.id: {g: (1.0 if chosen.get(j.id) == g else 0.0) for g in types} for j in jobs
            }
        )


@register
class Fifo(FifoPerf):
    name: ClassVar[str] = "fifo"
    agnostic: ClassVar[bool] = True
    shuffle_round_types: ClassVar[bool] = True
