"""The round's ranking over columns, kept across rounds: for a queue of thousands.

:func:`~lyra_ray.scheduling.round_greedy.rank` walks every candidate entry's rows in
Python, and :meth:`RoundMechanism._entry_rows` rebuilds those rows whenever the job set
changes. Live, with 10,000 queued jobs, that is every mid-round backfill (a completion
frees GPUs, arrivals replace it): ~60 ms a call, for a handful of idle GPUs. Yet between
two calls almost nothing changes: a few jobs come and go, the running ones are credited
the time they ran, and X and the deficits change only at a reset.

:class:`EntryIndex` keeps, per candidate entry (a job, or a pair) and GPU type, the
columns the ranking reads, as numpy arrays: X, the time received since the last reset,
the deficit, whether it can run there, its speed relative to its best type (for the type
order) and its gang size. :meth:`EntryIndex.sync` brings them up to date by what
changed: new or departed entries (a gather by position), entries whose throughput row
was replaced, entries the round credited (``dirty``, reported by the mechanism), and all
of X, time and deficit when a reset replaced the bookkeeping's dicts. :class:`IndexRanker`
then computes one type's priorities in a few vector operations and sorts only the
entries still unplaced whose gang fits the GPUs left.

Exact, not approximate: the priority is computed with the same float operations, in
the same order (``x * total / mine``), the sort is stable on the same keys (priority,
deficit, X, best first; ties keep the entries' order) and the type order sums each
type's relative speeds in the same sequence; ``tests/unit/test_round_rank.py`` runs
whole schedules both ways and gets the same answers, and the simulator's JCTs do not
move. Pure: numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import compress, islice, repeat
from operator import is_not, methodcaller

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Assignment, GpuType, JobId, JobView, split_pair
from lyra_ray.scheduling.round_greedy import BIG, Row

_EMPTY: dict[GpuType, float] = {}
Floats = NDArray[np.float64]


class EntryIndex:
    """Per candidate entry and GPU type, the ranking's inputs as columns (see module)."""

    def __init__(self, types: Sequence[GpuType]) -> None:
        self.types = list(types)
        """The GPU types of the columns (the snapshot's); other types start a new index."""
        self.tpos = {g: t for t, g in enumerate(self.types)}
        self.keys: list[str] = []
        """The entries, in the mechanism's order: the active jobs, then the pairs."""
        self.pos: dict[str, int] = {}
        self.singles = 0
        """How many of ``keys`` are single jobs (they come first)."""
        self.src: dict[JobId, Row] = {}
        """The throughput row each single's columns were built from (replaced, never
        edited, by the mechanism: a different object is a changed row)."""
        self.sig: tuple[object, object, object] | None = None
        """The bookkeeping dicts (X, time, deficits) the columns were read from."""
        self.dirty: set[str] = set()
        """Entries whose time received changed since the last sync (the mechanism's
        credit reports them); emptied by :meth:`sync`."""
        self.members: dict[JobId, list[int]] = {}
        """Job -> positions of the pairs it is a member of."""
        n_types = len(self.types)
        self.x: Floats = np.zeros((n_types, 0))
        self.m: Floats = np.zeros((n_types, 0))
        self.d: Floats = np.zeros((n_types, 0))
        self.speed: Floats = np.zeros((n_types, 0))
        self.run: NDArray[np.bool_] = np.zeros((n_types, 0), dtype=bool)
        self.need: NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def sync(
        self,
        keys: list[str],
        singles: int,
        thr: Mapping[JobId, Row],
        active: Mapping[JobId, JobView],
        pair_types: Callable[[str], AbstractSet[GpuType]],
        book: tuple[Mapping[str, Row], Mapping[str, Row], Mapping[str, Row]],
    ) -> None:
        """Bring the columns to ``keys`` (``singles`` jobs, then pairs), the throughput
        rows ``thr``, and ``book``: the mechanism's (X, time received, deficits)."""
        fresh: list[int] = []
        if keys != self.keys:
            fresh = self._move(keys)
        self.singles = singles
        self._singles(keys, singles, thr, active)
        self._pairs(keys, singles, active, pair_types)
        sig = self.sig
        if sig is None or any(a is not b for a, b in zip(sig, book, strict=True)):
            self._book(keys, range(len(keys)), book)
            self.sig = book
        else:
            if fresh:
                self._book(keys, fresh, book)
            pos = self.pos
            got = [i for i in map(pos.get, self.dirty) if i is not None]
            if got:
                self._times(keys, got, book[1])
        self.dirty.clear()

    def _move(self, keys: list[str]) -> list[int]:
        """Re-order the columns to ``keys``; returns the positions of new entries."""
        n = len(keys)
        idx = np.fromiter(map(self.pos.get, keys, repeat(-1)), dtype=np.intp, count=n)
        new = idx < 0
        if len(self.keys) == 0:
            shape = (len(self.types), n)
            self.x, self.m, self.d = np.zeros(shape), np.zeros(shape), np.zeros(shape)
            self.speed, self.run = np.zeros(shape), np.zeros(shape, dtype=bool)
            self.need = np.ones(n, dtype=np.int64)
        else:
            take = np.where(new, 0, idx)
            self.x, self.m, self.d = self.x[:, take], self.m[:, take], self.d[:, take]
            self.speed, self.run = self.speed[:, take], self.run[:, take]
            self.need = self.need[take]
        self.keys = keys
        self.pos = dict(zip(keys, range(n), strict=True))
        if len(self.src) > 0:
            for gone in self.src.keys() - self.pos.keys():
                del self.src[gone]
        fresh: list[int] = np.flatnonzero(new).tolist()
        for i in fresh:  # a new entry has no source row yet, whatever a stale one said
            self.src.pop(keys[i], None)
        return fresh

    def _singles(
        self,
        keys: list[str],
        singles: int,
        thr: Mapping[JobId, Row],
        active: Mapping[JobId, JobView],
    ) -> None:
        """Runnable types, relative speeds and gang size of the jobs whose row is new."""
        skeys = keys[:singles]
        rows = list(map(thr.__getitem__, skeys))
        src = self.src
        stale = compress(range(singles), map(is_not, rows, map(src.get, skeys)))
        types, run, speed = self.types, self.run, self.speed
        for i in stale:
            key, row = skeys[i], rows[i]
            src[key] = row
            best = max(row.values(), default=0.0)
            for t, g in enumerate(types):
                v = row.get(g, 0.0)
                run[t, i] = v > 0
                speed[t, i] = v / best if best > 0 else 0.0
            self.need[i] = max(1, active[key].spec.min_workers)

    def _pairs(
        self,
        keys: list[str],
        singles: int,
        active: Mapping[JobId, JobView],
        pair_types: Callable[[str], AbstractSet[GpuType]],
    ) -> None:
        """The pairs' columns, every sync (they are few; ``pair_types`` is cached)."""
        self.members = {}
        for i in range(singles, len(keys)):
            key = keys[i]
            members = split_pair(key)
            ok = pair_types(key)
            for t, g in enumerate(self.types):
                self.run[t, i] = g in ok
                self.speed[t, i] = 0.0
            self.need[i] = max(max(1, active[m].spec.min_workers) for m in members)
            for m in members:
                self.members.setdefault(m, []).append(i)

    def _book(
        self,
        keys: list[str],
        at: Iterable[int],
        book: tuple[Mapping[str, Row], Mapping[str, Row], Mapping[str, Row]],
    ) -> None:
        """X, time received and deficit of the entries at ``at``, from the bookkeeping."""
        at = list(at)
        ks = [keys[i] for i in at] if len(at) != len(keys) else keys
        for col, table in zip((self.x, self.m, self.d), book, strict=True):
            rows = list(map(table.get, ks, repeat(_EMPTY)))
            for t, g in enumerate(self.types):
                col[t, at] = list(map(methodcaller("get", g, 0.0), rows))

    def _times(self, keys: list[str], at: list[int], job_time: Mapping[str, Row]) -> None:
        rows = [job_time.get(keys[i], _EMPTY) for i in at]
        for t, g in enumerate(self.types):
            self.m[t, at] = [r.get(g, 0.0) for r in rows]

    def type_order(self, gpus: Mapping[GpuType, int]) -> list[GpuType]:
        """:func:`~lyra_ray.scheduling.type_order.fastest_first` over the singles' rows:
        each type's relative speeds summed in the jobs' order (a sequential sum, as the
        loop there adds them), types with GPUs, fastest first, then by name."""
        n = self.singles
        speed = {
            g: float(np.cumsum(self.speed[t, :n])[-1]) if n else 0.0
            for t, g in enumerate(self.types)
        }
        return sorted((g for g, c in gpus.items() if c > 0), key=lambda g: (-speed.get(g, 0.0), g))

    def ranked(
        self, gt: GpuType, total: float, skip_zero: bool, blocked: NDArray[np.bool_], free: int
    ) -> list[int]:
        """Positions of the entries :func:`~lyra_ray.scheduling.round_greedy.rank` would
        list for ``gt`` that are not ``blocked`` and whose gang fits ``free``, best first.

        Leaving out the gangs that do not fit changes nothing: the greedy pass skips them,
        and the GPUs left only shrink during a type's turn.
        """
        t = self.tpos.get(gt)
        if t is None:
            return []
        xs_all = self.x[t]
        mask = self.run[t] & ~blocked & (self.need <= free)
        if skip_zero:
            mask &= xs_all > 0
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            return []
        xs, ms, ds = xs_all[idx], self.m[t][idx], self.d[t][idx]
        pri = xs * BIG
        if total > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                pri = np.where(ms > 0, xs * total / ms, pri)
        pri = np.where(xs > 0, pri, 0.0)
        order: list[int] = idx[np.lexsort((-xs, -ds, -pri))].tolist()
        return order


class IndexRanker:
    """The greedy pass's ranking from an :class:`EntryIndex`: each type's turn ranks the
    entries none of whose jobs is placed yet (as the row-based ranking filters them)."""

    def __init__(self, index: EntryIndex, totals: Mapping[GpuType, float], skip_zero: bool):
        self.index, self.totals, self.skip_zero = index, totals, skip_zero
        self.blocked: NDArray[np.bool_] = np.zeros(len(index.keys), dtype=bool)
        self.n_out = 0
        self.held: set[JobId] = set()

    def ranked(
        self, gt: GpuType, out: Mapping[JobId, Assignment], held: AbstractSet[JobId], free: int
    ) -> Iterable[str]:
        ix = self.index
        placed = list(islice(out, self.n_out, None))  # ``out`` only grows
        self.n_out = len(out)
        placed += [j for j in held if j not in self.held]
        self.held.update(held)
        if placed:
            at = [i for i in map(ix.pos.get, placed) if i is not None]
            for j in placed:
                at += ix.members.get(j, ())
            self.blocked[at] = True
        order = ix.ranked(gt, self.totals.get(gt, 0.0), self.skip_zero, self.blocked, free)
        return map(ix.keys.__getitem__, order)
