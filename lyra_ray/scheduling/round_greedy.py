"""The selection half of Gavel's round mechanism (see :mod:`lyra_ray.scheduling.rounds`).

Given each entry's X row, time received and deficit, :func:`rank` orders the entries of
one GPU type by priority and :func:`greedy` hands out the GPUs, types in order, with gang
semantics and lease extension. Pure functions over plain data, kept apart from the
mechanism's bookkeeping so that each file stays one concept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from operator import itemgetter
from typing import Protocol

from lyra_ray.model import (
    Assignment,
    ClusterSnapshot,
    GpuType,
    JobId,
    JobStatus,
    JobView,
    split_pair,
)

BIG = 1e9  # Gavel's "nothing received yet" multiplier (not inf: larger X still sorts first)
_RANK = itemgetter(0, 1, 2)  # entries sort by (priority, deficit, X), best first
_KEY = itemgetter(3)
Entry = tuple[float, float, float, str]
Row = dict[GpuType, float]
EntryRow = tuple[str, set[GpuType], Row, Row, Row]
"""(key, GPU types it can run on, X row, time-received row, deficit row)"""
_DONE = (JobStatus.FINISHED, JobStatus.CANCELLED, JobStatus.FAILED)


def active_by_id(snap: ClusterSnapshot) -> dict[JobId, JobView]:
    """``snap.active_jobs`` by id; identity tests, as hashing an enum member runs Python."""
    a, b, c = _DONE
    return {j.id: j for j in snap.jobs if not (j.status is a or j.status is b or j.status is c)}


def pair_runnable(snap: ClusterSnapshot, a: JobView, b: JobView, gt: GpuType) -> bool:
    """Whether jobs ``a`` and ``b`` can share GPUs of type ``gt`` (both make progress)."""
    pt = snap.throughput_model.pair_throughput(a.spec, b.spec, gt)
    return pt is not None and pt[0] > 0 and pt[1] > 0


def rank(rows: list[EntryRow], gt: GpuType, total: float, skip_zero: bool) -> list[Entry]:
    """(priority, deficit, X, key) of every entry that can run on ``gt``, best first.

    ``total`` is the time all entries ran on ``gt`` since the last reset; priority is
    ``X / (mine / total)``, ``X * BIG`` while the entry has received nothing, 0 where
    ``X == 0`` (such entries are left out when ``skip_zero``).
    """
    entries: list[Entry] = []
    add = entries.append
    for key, runnable, xs, times, defs in rows:
        if gt not in runnable:
            continue
        x = xs.get(gt, 0.0)
        if x > 0:
            mine = times.get(gt, 0.0)
            add(
                (
                    x * BIG if total <= 0 or mine <= 0 else x * total / mine,
                    defs.get(gt, 0.0),
                    x,
                    key,
                )
            )
        elif not skip_zero:
            add((0.0, defs.get(gt, 0.0), x, key))
    entries.sort(key=_RANK, reverse=True)
    return entries


class Ranker(Protocol):
    """One GPU type's turn of the greedy pass: the entries to offer it, best first."""

    def ranked(
        self, gt: GpuType, out: Mapping[JobId, Assignment], held: AbstractSet[JobId], free: int
    ) -> Iterable[str]:
        """Keys of the entries :func:`rank` orders for ``gt`` none of whose jobs is in
        ``out`` or ``held`` yet; entries whose gang exceeds ``free`` may be left out."""
        ...


class RowRanker:
    """:func:`rank` over entry rows, dropping the placed ones before each type's turn."""

    def __init__(
        self,
        rows: list[EntryRow],
        totals: Mapping[GpuType, float],
        skip_zero: bool,
        active: Mapping[JobId, JobView],
        singles: bool | None = None,
    ) -> None:
        self.rows, self.totals, self.skip_zero, self.active = rows, totals, skip_zero, active
        if singles is None:  # no pairs: a key is placed iff in ``out``
            singles = all(r[0] in active for r in rows)
        self.singles = singles

    def ranked(
        self, gt: GpuType, out: Mapping[JobId, Assignment], held: AbstractSet[JobId], free: int
    ) -> Iterable[str]:
        rows = self.rows
        if out or held:
            if self.singles:
                rows = [r for r in rows if r[0] not in out and r[0] not in held]
            else:
                rows = [r for r in rows if not _placed(r[0], out, self.active, held)]
            self.rows = rows
        if not rows:
            return ()
        return map(_KEY, rank(rows, gt, self.totals.get(gt, 0.0), self.skip_zero))


def greedy(
    order: list[GpuType],
    ranker: Ranker,
    active: Mapping[JobId, JobView],
    gpus: Mapping[GpuType, int],
    prev: Mapping[JobId, Assignment],
    pinned: Mapping[JobId, Assignment],
    unallocated: AbstractSet[JobId] = frozenset(),
) -> dict[JobId, Assignment]:
    """Types in ``order``, each type's entries best first (``ranker``: :class:`RowRanker`,
    or the columns of :mod:`lyra_ray.scheduling.round_rank`): take an entry whose job(s)
    do not run yet and whose gang fits what is left of the type.

    A job in ``unallocated`` (active, but unknown to the allocation in force: it arrived
    after the last reset) is taken like any other, its GPUs counted as used, yet it is
    not run: Gavel's ``_schedule_jobs_on_workers`` selects it and then skips it
    (``job_id not in self._allocation``), so it waits for the next reset and the GPUs
    it was given stay idle this round.

    A type ranks only the entries still unplaced when its turn comes: the others would
    be skipped anyway, and the sort is stable, so the outcome is the same as ranking all.
    """
    left = {g: c for g, c in gpus.items() if c > 0}
    out: dict[JobId, Assignment] = {}
    for group in _pinned_groups(pinned, prev, active):
        a = next(iter(group.values()))  # a pair's members hold the same GPUs: count once
        if left.get(a.gpu_type, 0) >= a.workers:
            out.update(group)
            left[a.gpu_type] -= a.workers
    left = {g: c for g, c in left.items() if c > 0}
    held: set[JobId] = set()  # unallocated jobs taken this round (they do not run)
    for gt in order:
        if not left:
            break  # every GPU is taken
        free = left.get(gt, 0)
        if free <= 0:
            continue
        for key in ranker.ranked(gt, out, held, free):
            if free <= 0:
                break
            job = active.get(key)
            if job is not None:  # a single job (the common case)
                if key in out or key in held:
                    continue
                need = max(1, job.spec.min_workers)
                if need > free:
                    continue
                free -= need
                if key in unallocated:
                    held.add(key)
                    continue
                old = prev.get(key)
                if old is not None and old.gpu_type == gt and old.partner is None:
                    out[key] = old  # lease extension: the same Assignment, nodes and all
                else:
                    out[key] = Assignment(gpu_type=gt, workers=need)
                continue
            members = split_pair(key)
            if any(m in out or m in held for m in members):
                continue
            need = max(max(1, active[m].spec.min_workers) for m in members)
            if need > free:
                continue
            free -= need
            for m in members:
                partner = next((o for o in members if o != m), None)
                old = prev.get(m)
                if old is not None and old.gpu_type == gt and old.partner == partner:
                    out[m] = old
                else:
                    out[m] = Assignment(gpu_type=gt, workers=need, partner=partner)
        if free > 0:
            left[gt] = free
        else:
            del left[gt]
    return out


def _pinned_groups(
    pinned: Mapping[JobId, Assignment],
    prev: Mapping[JobId, Assignment],
    active: Mapping[JobId, JobView],
) -> list[dict[JobId, Assignment]]:
    """The active pinned jobs, one group per job, a space-sharing pair as one group.

    A pinned job whose last assignment names a partner keeps that partner with it (when
    the partner is active and its own assignment names the job back, on the same type):
    dropping the partner would change the pinned job's assignment too (it would run alone
    on the whole GPU), i.e. restart the very run the lease protects. A partner that no
    longer pairs back leaves the pinned job to run alone.
    """
    groups: list[dict[JobId, Assignment]] = []
    seen: set[JobId] = set()
    for jid, a in pinned.items():
        if jid not in active or jid in seen:
            continue
        seen.add(jid)
        p = a.partner
        pa = prev.get(p) if p is not None else None
        if p is None:
            groups.append({jid: a})
        elif p in active and pa is not None and pa.partner == jid and pa.gpu_type == a.gpu_type:
            seen.add(p)
            groups.append({jid: a, p: pa})
        else:
            groups.append({jid: Assignment(gpu_type=a.gpu_type, workers=a.workers)})
    return groups


def _placed(
    key: str,
    out: Mapping[JobId, Assignment],
    active: Mapping[JobId, JobView],
    held: AbstractSet[JobId],
) -> bool:
    if key in active:
        return key in out or key in held
    return any(m in out or m in held for m in split_pair(key))
