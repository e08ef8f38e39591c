"""Each job's remaining time at its best speed, cached by the view it was computed from.

Why its own owner: phase 1 orders every active job by remaining time every decision,
and a busy cluster has 10,000 queued jobs. A view is rebuilt whenever anything in it
changes, so the same view object gives the same answer; this cache keeps last
decision's times for unchanged views and is the only state it holds (not saved: it is
rebuilt from the first decision after a restart).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView


def remaining_time(snap: ClusterSnapshot, job: JobView, types: Sequence[GpuType]) -> float:
    """Seconds ``job`` has left at its minimum size on the fastest of ``types``."""
    # ``job.throughput`` is the model's row at the job's minimum size, kept by the core
    # for every GPU type the cluster has; reading it rather than asking the model again
    # matters with 10,000 queued jobs, each ordered every decision. A view built without
    # the row (a test's, a hand-made snapshot) asks the model.
    row = job.throughput
    best = 0.0
    for t in types:
        v = row.get(t)
        if v is None:
            v = snap.throughput(job, t, job.spec.min_workers)
        best = max(best, v)
    return job.remaining_steps / best if best > 0 else float("inf")


def ends_on_type(
    snap: ClusterSnapshot, chosen: Mapping[JobId, tuple[GpuType, int, int]], gpu_type: GpuType
) -> list[tuple[float, int]]:
    """(seconds until it ends, GPUs of its base) for each job of ``chosen`` (job -> (type,
    base, upper)) on ``gpu_type``, at its current speed there (at its base if it is not
    running there on that type alone). What both a move's reservation and
    ``finish_first``'s timeline project the type's GPUs from."""
    by_id = {j.id: j for j in snap.active_jobs}
    out: list[tuple[float, int]] = []
    for jid, (t, base, _) in chosen.items():
        job = by_id.get(jid)
        if t != gpu_type or job is None:
            continue
        cur = job.current
        size = cur.workers if cur is not None and cur.gpu_type == t and not cur.extra else base
        rate = snap.throughput(job, t, size)
        out.append((job.remaining_steps / rate if rate > 0 else float("inf"), base))
    return out


class RemainingTimes:
    """Every active job's remaining time, reusing last decision's for unchanged views."""

    def __init__(self) -> None:
        self._by_job: dict[JobId, tuple[JobView, float]] = {}
        self._types: tuple[GpuType, ...] = ()

    def of(self, snap: ClusterSnapshot, types: Sequence[GpuType]) -> dict[JobId, float]:
        key = tuple(types)
        cache = self._by_job if key == self._types else {}
        fresh: dict[JobId, tuple[JobView, float]] = {}
        out: dict[JobId, float] = {}
        for j in snap.jobs:
            hit = cache.get(j.id)
            r = hit[1] if hit is not None and hit[0] is j else remaining_time(snap, j, types)
            fresh[j.id] = (j, r)
            out[j.id] = r
        self._by_job, self._types = fresh, key
        return out
