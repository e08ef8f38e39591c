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

Optionally, a move does not take GPUs a queued job is *waiting to gather*
(:func:`reservations`). Free fast GPUs too few for the first queued job that needs that
type are its start in the making: more free up as running jobs end. A move that took
them and ran past the moment that job would have had enough (its *shadow time*) delayed
it, and one big job could be held back move after move (on workload-2/1 of the Lyra
evaluation a 32-GPU job waited about 2,900 s longer for two moved 4-GPU jobs, and the
jobs behind it queued longer too). With ``waiting`` given, a move onto a type with a
waiting job is allowed only if the moved job is expected to finish there by the shadow
time, or it fits in what is left over then (EASY backfilling's rule, applied to moves
only: phase 1 keeps the paper's shortest-job-first start). The Lyra policy passes it
only when ``move_holds_back`` is on, which it is not by default: on the evaluation's
runs the rule protects the waiting job but costs mean queuing and JCT overall (a job
that waits to gather a whole type is usually large, and the moves it blocks let many
small jobs finish sooner; docs/lyra.md's ablation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView
from lyra_ray.policies.lyra.remaining import ends_on_type


def reservations(
    snap: ClusterSnapshot,
    chosen: Mapping[JobId, tuple[GpuType, int, int]],
    free: Mapping[GpuType, int],
    waiting: Sequence[tuple[JobView, int]],
) -> dict[GpuType, list[float]]:
    """Per GPU type: ``[shadow time, GPUs to spare then]`` for the first ``waiting`` job
    (queued, in phase 1's order, with the GPUs its start needs) that needs that type and
    could ever start on it. The shadow time is when enough of the type's GPUs will be
    free for it, the jobs ``chosen`` on the type ending at their current speed; a type
    no waiting job can use, or whose jobs never free enough, has none."""
    cap: dict[GpuType, int] = {}
    for n in snap.nodes:
        cap[n.gpu_type] = cap.get(n.gpu_type, 0) + n.num_gpus
    out: dict[GpuType, list[float]] = {}
    for g in free:
        head = next(
            (
                base
                for job, base in waiting
                if free[g] < base <= cap.get(g, 0) and snap.throughput(job, g, base) > 0
            ),
            None,
        )
        if head is None:
            continue
        ends = ends_on_type(snap, chosen, g)
        have = free[g]
        for end, gpus in sorted(ends):
            have += gpus
            if have >= head:
                out[g] = [end, float(have - head)]
                break
    return out


def move_to_faster(
    snap: ClusterSnapshot,
    chosen: dict[JobId, tuple[GpuType, int, int]],
    free: dict[GpuType, int],
    min_gain_s: float,
    price: Callable[[JobView], float],
    book: Callable[[JobId, GpuType, GpuType, int], bool] | None = None,
    waiting: Sequence[tuple[JobView, int]] = (),
) -> list[JobId]:
    """Move running jobs of ``chosen`` (job -> (type, base, upper)) to faster types
    with ``free`` room; both are updated. Returns the jobs moved. ``book(job, from, to,
    gpus)``, when given, may refuse a move (teams' bounds:
    :func:`lyra_ray.policies.lyra.team_bounds.move_within`) and books the ones it allows.
    ``waiting``: the queued jobs phase 1 could not start, in its order, with the GPUs
    each needs; a move does not delay the first of them on its type (module doc)."""
    by_id = {j.id: j for j in snap.active_jobs}
    offers: list[tuple[float, JobId, GpuType, float]] = []  # gain, job, to, done in
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
                cost = price(job)
                gain = rem / now - rem / fast - cost
                if gain >= min_gain_s:
                    offers.append((gain, jid, g, cost + rem / fast))
    held = reservations(snap, chosen, free, waiting) if offers and waiting else {}
    moved: list[JobId] = []
    for _, jid, g, done_s in sorted(offers, key=lambda o: (-o[0], o[1], o[2])):
        t, base, upper = chosen[jid]
        if jid in moved or free.get(g, 0) < base:
            continue
        shadow = held.get(g)
        spare = shadow is not None and base <= shadow[1]
        if shadow is not None and not spare and done_s > shadow[0]:
            continue  # it would hold back the job waiting to gather these GPUs
        if book is not None and not book(jid, t, g, base):
            continue
        if shadow is not None and done_s > shadow[0]:
            shadow[1] -= base
        free[g] -= base
        free[t] = free.get(t, 0) + base
        chosen[jid] = (g, base, upper)
        moved.append(jid)
    return moved
