"""Moving a running job to faster GPUs that phase 1 left free.

Phase 1 starts a job on the first type with room for its minimum, so when the fast
type (A100s) is full a job starts on a slow one (lent T4s) rather than wait. On
measured speeds that is often right for its queuing and wrong for its completion: a
YOLOv3 job that runs 72 min on A100s runs 4 h on T4s. Phase 1 keeps every running job
where it is (a move is a checkpoint and a restart on other GPUs; across types, the
report counts it as a preemption), so such a job used to stay slow to the end.

After phase 1 has placed every job it can, the fast GPUs that no job took are offered to
running jobs on slower types: a job moves when its remaining time there beats its
remaining time here by at least ``min_gain_s``, its restart price included
(:mod:`lyra_ray.model.restart_cost`). Largest gains first. A move never takes GPUs a
queued job could start on (they were offered to the queue first), and the GPUs it
leaves go to queued jobs that fit there. Only a job running on one type moves (a job
with flexible workers on another type already grows onto it in phase 3).
"""

from __future__ import annotations

from collections.abc import Callable

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView


def move_to_faster(
    snap: ClusterSnapshot,
    chosen: dict[JobId, tuple[GpuType, int, int]],
    free: dict[GpuType, int],
    min_gain_s: float,
    price: Callable[[JobView], float],
    book: Callable[[JobId, GpuType, GpuType, int], bool] | None = None,
) -> list[JobId]:
    """Move running jobs of ``chosen`` (job -> (type, base, upper)) to faster types
    with ``free`` room; both are updated. Returns the jobs moved. ``book(job, from, to,
    gpus)``, when given, may refuse a move (teams' bounds:
    :func:`lyra_ray.policies.lyra.team_bounds.move_within`) and books the ones it allows."""
    by_id = {j.id: j for j in snap.active_jobs}
    offers: list[tuple[float, JobId, GpuType]] = []
    for jid, (t, base, _) in chosen.items():
        job = by_id.get(jid)
        cur = job.current if job is not None else None
        if job is None or cur is None or cur.extra or cur.gpu_type != t:
            continue
        now = snap.throughput(job, t, cur.workers)
        if now <= 0:
            continue
        rem = job.remaining_steps
        for g, n in free.items():
            fast = snap.throughput(job, g, base) if g != t and n >= base else 0.0
            if fast > now:
                gain = rem / now - rem / fast - price(job)
                if gain >= min_gain_s:
                    offers.append((gain, jid, g))
    moved: list[JobId] = []
    for _, jid, g in sorted(offers, key=lambda o: (-o[0], o[1], o[2])):
        t, base, upper = chosen[jid]
        if jid in moved or free.get(g, 0) < base:
            continue
        if book is not None and not book(jid, t, g, base):
            continue
        free[g] -= base
        free[t] = free.get(t, 0) + base
        chosen[jid] = (g, base, upper)
        moved.append(jid)
    return moved
