"""Gavel's FIFO, as Gavel's simulator runs it: ``fifo``, ``fifo_perf`` and ``fifo_packed``.

Queued jobs, in arrival order, take a GPU type with enough unallocated GPUs, and the
queue stops at the first job that fits nowhere (no job jumps ahead). The answer is X = 1
on the chosen type, realised by the round mechanism like every Gavel policy, which
(Gavel's rule for FIFO) never runs a zero-priority job on idle GPUs
(``round_skip_zero_priority``). The three modes differ exactly where Gavel's
``FIFOPolicy`` does:

* ``fifo_perf`` forgets its answer on every recomputation and places the queue afresh,
  each job on its fastest type among those with room.
* ``fifo`` (heterogeneity-agnostic) keeps every placed job where it is until it ends; a
  finished job hands its type to the head of the queue if that job fits there (counted
  against the GPUs of the jobs met so far in id order, so it may overcommit), and only
  then is the rest of the queue placed. The type: Gavel draws a random index among the
  types with room, but the type it *uses* is the alphabetically last type that still
  had free GPUs when the pass began (the loop variable left over from filtering); the
  random index only decides which type leaves the list when the used one fills up. A
  type that reaches zero while another type is removed stays in the list and is given to
  every later job of that pass, beyond its size. This is what Gavel's published
  agnostic-FIFO numbers come from, so it is what ``fifo`` does (see docs/gavel.md); the
  random draws come from one ``random.Random(seed)`` used in sequence, as Gavel's.
* ``fifo_packed`` is ``fifo_perf`` followed by Gavel's packing pass: while the queue is
  not empty, its head joins the already placed single job (same scale factor) whose
  normalised co-located throughput is highest and above 1.5, on that job's type; the
  first queued job with no such partner ends the pass.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobView, pair_key
from lyra_ray.model.team_bounds import Ledger, ledger_of
from lyra_ray.policies.base import PolicyBase, register

_Order = tuple[float, JobId]
"""A job's place in the queue: Gavel's job ids count arrivals, so (arrival, id) here."""


def _order(job: JobView) -> _Order:
    return (job.arrival_s, job.id)


def _sf(job: JobView) -> int:
    return max(1, job.spec.min_workers)


def _fractions(
    jobs: list[JobView], chosen: Mapping[str, GpuType], types: Mapping[GpuType, int]
) -> dict[str, dict[GpuType, float]]:
    # Every row is the all-zero row with at most its chosen type set to 1.0: a copy of one
    # prebuilt row (same keys, same order), not a comprehension per job (this runs over
    # the whole queue at every solve).
    zero = dict.fromkeys(types, 0.0)
    out: dict[str, dict[GpuType, float]] = {}
    for j in jobs:
        row = out[j.id] = zero.copy()
        g = chosen.get(j.id)
        if g is not None and g in row:
            row[g] = 1.0
    for key, gt in chosen.items():
        if key not in out:  # a pair
            out[key] = {g: (1.0 if g == gt else 0.0) for g in types}
    return out


@register
class FifoPerf(PolicyBase):
    name: ClassVar[str] = "fifo_perf"
    round_skip_zero_priority: ClassVar[bool] = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Nothing is kept; a state saved before #18 (``{"kept": ...}``) is accepted."""
        if set(state) - {"kept"}:
            raise ValueError(f"policy {self.name!r} keeps no state, got {sorted(state)}")

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        types = snap.gpus_by_type()
        free = dict(types)
        queue = sorted(snap.active_jobs, key=_order)
        chosen: dict[str, GpuType] = {}
        rest = self._fastest_first(snap, queue, free, chosen)
        self._after(snap, rest, chosen)
        return Allocation(fractions=_fractions(queue, chosen, types))

    def _after(
        self, snap: ClusterSnapshot, rest: list[JobView], chosen: dict[str, GpuType]
    ) -> None:
        """Hook for ``fifo_packed``'s packing pass over the jobs left in the queue."""

    @staticmethod
    def _fastest_first(
        snap: ClusterSnapshot,
        queue: list[JobView],
        free: dict[GpuType, int],
        chosen: dict[str, GpuType],
    ) -> list[JobView]:
        """Gavel's perf-mode pass; returns the jobs still queued when it stopped.

        Under teams' quotas (a strict ``team_bounds``) a type has room for a job only if
        its team may also take the GPUs; a job its team's quota keeps out is passed over,
        not waited for (Kueue's default), so it does not hold up other teams' jobs."""
        open_types = sorted(g for g, c in free.items() if c > 0)
        ledger: Ledger | None = ledger_of(snap.team_bounds, book=False)  # places afresh
        i = 0
        while i < len(queue) and open_types:
            job = queue[i]
            i += 1
            sf = _sf(job)
            room = [g for g in open_types if free[g] >= sf]
            if not room:
                return queue[i:]
            if ledger is not None:
                room = [g for g in room if ledger.fits(job.id, g, sf)]
                if not room:
                    continue
            # The first type with the highest throughput, in sorted order (Gavel: strict >);
            # each type's throughput asked once (this pass runs at every solve).
            tput = {g: snap.throughput(job, g) for g in room}
            gt = max(room, key=lambda g: (tput[g], -room.index(g)))
            if tput[gt] > 0:
                chosen[job.id] = gt
                free[gt] -= sf
                if ledger is not None:
                    ledger.take(job.id, gt, sf)
                if free[gt] == 0:
                    open_types.remove(gt)
        return queue[i:]


@register
class FifoPacked(FifoPerf):
    name: ClassVar[str] = "fifo_packed"
    threshold: ClassVar[float] = 1.5
    """Gavel's ``packing_threshold``: pack only when the two jobs' normalised co-located
    throughputs add up to more than this."""

    def _after(
        self, snap: ClusterSnapshot, rest: list[JobView], chosen: dict[str, GpuType]
    ) -> None:
        jobs = {j.id: j for j in snap.active_jobs}
        for job in rest:
            best, best_gain = None, self.threshold
            for other_id, gt in chosen.items():
                other = jobs.get(other_id)
                if other is None or _sf(other) != _sf(job):  # a pair, or another size
                    continue
                gain = self._gain(snap, other, job, gt)
                if gain > best_gain:
                    best, best_gain = other_id, gain
            if best is None:
                return  # FIFO: nobody behind the head of the queue may jump ahead
            gt = chosen.pop(best)
            chosen[pair_key(best, job.id)] = gt

    @staticmethod
    def _gain(snap: ClusterSnapshot, a: JobView, b: JobView, gt: GpuType) -> float:
        pt = snap.throughput_model.pair_throughput(a.spec, b.spec, gt)
        if pt is None:
            return 0.0
        total = 0.0
        for member, shared in zip((a, b), pt, strict=True):
            alone = snap.throughput(member, gt)
            if shared > 0 and alone > 0:
                total += shared / alone
        return total


@register
class Fifo(PolicyBase):
    """Gavel's heterogeneity-agnostic FIFO (``FIFOPolicy(mode='base')``); see the module doc."""

    name: ClassVar[str] = "fifo"
    round_skip_zero_priority: ClassVar[bool] = True
    shuffle_round_types: ClassVar[bool] = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._kept: dict[JobId, tuple[_Order, GpuType]] = {}

    def to_state(self) -> dict[str, Any]:
        """The kept placements (with each job's queue order) and the random stream's state."""
        version, internal, gauss = self._rng.getstate()
        return {
            "kept": [[o[0], o[1], g] for o, g in sorted(self._kept.values())],
            "rng": [version, list(internal), gauss],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        kept = state.get("kept", [])
        if isinstance(kept, Mapping):  # saved before #18: {job: type}, no arrival times
            kept = [[0.0, j, g] for j, g in kept.items()]
        self._kept = {str(j): ((float(a), str(j)), str(g)) for a, j, g in kept}
        rng = state.get("rng")
        self._rng = random.Random(self.seed)
        if rng is not None:
            self._rng.setstate((int(rng[0]), tuple(int(x) for x in rng[1]), rng[2]))

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        types = snap.gpus_by_type()
        free = dict(types)
        active = {j.id: j for j in snap.active_jobs}
        jobs = sorted(active.values(), key=_order)
        # A kept job whose type can no longer hold it (nodes left; Gavel's cluster never
        # shrinks) is queued again rather than kept where it could never run.
        for jid, (_, gt) in list(self._kept.items()):
            if jid in active and not self._can_hold(snap, active[jid], gt, types):
                del self._kept[jid]
        queue = [j for j in jobs if j.id not in self._kept]
        # Jobs placed earlier, in queue order: a finished one hands its type to the head
        # of the queue (if it fits the GPUs counted so far), a running one keeps its GPUs.
        for jid, (_, gt) in sorted(self._kept.items(), key=lambda kv: kv[1][0]):
            if jid in active:
                free[gt] -= _sf(active[jid])
                continue
            del self._kept[jid]
            if queue:
                head = queue[0]
                if _sf(head) <= free[gt] and snap.throughput(head, gt) > 0:
                    queue.pop(0)
                    self._kept[head.id] = (_order(head), gt)
                    free[gt] -= _sf(head)
        self._place(snap, queue, free, types)
        chosen = {jid: gt for jid, (_, gt) in self._kept.items()}
        return Allocation(fractions=_fractions(jobs, chosen, types))

    @staticmethod
    def _can_hold(
        snap: ClusterSnapshot, job: JobView, gt: GpuType, types: Mapping[GpuType, int]
    ) -> bool:
        return snap.throughput(job, gt) > 0 and _sf(job) <= types.get(gt, 0)

    def _place(
        self,
        snap: ClusterSnapshot,
        queue: list[JobView],
        free: dict[GpuType, int],
        types: Mapping[GpuType, int],
    ) -> None:
        """Gavel's base-mode pass over the rest of the queue (the type rule in the module doc).

        One deviation: where Gavel's type could never run the job (no throughput there,
        or fewer GPUs of that type than the job needs) Gavel skips the job, which can then
        starve (the same type tends to come back at every recomputation, and Gavel's
        simulator never ends). Here the job takes a type with room that can run it,
        chosen by the same random draw. Gavel's traces and catalogue never reach this
        case (every job runs on every type there), so its figures are unchanged.
        """
        open_types = sorted(g for g, c in free.items() if c > 0)
        for job in queue:
            if not open_types:
                return
            sf = _sf(job)
            room = [i for i, g in enumerate(open_types) if free[g] >= sf]
            if not room:
                return
            drawn = self._rng.randrange(len(room))
            gt = open_types[-1]
            leaving = room[drawn]  # Gavel's quirk: the drawn type leaves when gt fills up
            if not self._can_hold(snap, job, gt, types):
                fit = [i for i in room if self._can_hold(snap, job, open_types[i], types)]
                if not fit:
                    continue
                leaving = fit[drawn % len(fit)]
                gt = open_types[leaving]
            self._kept[job.id] = (_order(job), gt)
            free[gt] -= sf
            if free[gt] == 0:
                open_types.pop(leaving)
