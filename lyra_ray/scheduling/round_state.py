"""The round mechanism's two kinds of memory, kept apart on purpose.

:class:`RoundState` is what a round's answer depends on: it is persisted, and a restored
mechanism decides exactly as the one that saved it. :class:`RoundMemo` only saves time:
it may be cleared at any moment without changing an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView, Node
from lyra_ray.scheduling.round_greedy import EntryRow, Row
from lyra_ray.scheduling.round_rank import EntryIndex
from lyra_ray.scheduling.type_order import TypeOrder

_THROUGHPUT = attrgetter("throughput")


@dataclass
class RoundState:
    """Gavel's round bookkeeping, as a value: what a round's answer depends on besides
    the snapshot, the allocation and the mechanism's settings.

    Times are per entry (a job, or a ``"a+b"`` pair) and GPU type, since the last
    reset; ``seen`` is each job's received time per type at the last round, so the
    next round credits only the difference.
    """

    job_time: dict[str, Row] = field(default_factory=dict)
    worker_time: Row = field(default_factory=dict)
    deficits: dict[str, Row] = field(default_factory=dict)
    alloc_ref: dict[str, Row] = field(default_factory=dict)
    """The allocation in force (adopted at the last reset)."""
    seen: dict[JobId, Mapping[GpuType, float]] = field(default_factory=dict)
    job_set: list[JobId] = field(default_factory=list)
    """The active jobs at the last reset: a different set is what triggers one."""
    last_reset: float | None = None
    capacity: dict[GpuType, int] | None = None
    """Training GPUs per type at the last reset: the cluster the allocation in force was
    adopted for. A different capacity (a node joined or left) triggers a reset too.
    ``None`` in a state saved before it was kept: then only the job set does."""
    rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe plain dicts (``seen`` holds the snapshot views' own mappings)."""
        seen = {k: dict(v) for k, v in self.seen.items()}
        return {**self.scalars(), **self.tables(), "seen": seen}

    def scalars(self) -> dict[str, Any]:
        """:meth:`to_dict` less the per-entry tables."""
        return {
            "worker_time": self.worker_time,
            "job_set": self.job_set,
            "last_reset": self.last_reset,
            "capacity": self.capacity,
            "rounds": self.rounds,
        }

    def tables(self) -> dict[str, Mapping[str, Mapping[GpuType, float]]]:
        """The per-entry tables, by reference and not copied (``seen`` holds the views'
        mappings): an incremental store reads them entry by entry between two rounds,
        and copying ``seen`` (10,000 entries live) for that cost more than the read.
        ``deficits`` and ``alloc_ref`` are replaced at a reset and never edited between
        resets; ``job_time`` is edited in place by every round; ``seen`` is replaced."""
        return {
            "job_time": self.job_time,
            "deficits": self.deficits,
            "alloc_ref": self.alloc_ref,
            "seen": self.seen,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundState:
        def nested(x: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
            return {k: {g: float(v) for g, v in row.items()} for k, row in x.items()}

        return cls(
            job_time=nested(d["job_time"]),
            worker_time={g: float(x) for g, x in d["worker_time"].items()},
            deficits=nested(d["deficits"]),
            alloc_ref=nested(d["alloc_ref"]),
            seen=dict(nested(d["seen"])),
            job_set=list(d["job_set"]),
            last_reset=None if d["last_reset"] is None else float(d["last_reset"]),
            capacity=(
                None if d.get("capacity") is None else {g: int(n) for g, n in d["capacity"].items()}
            ),
            rounds=int(d["rounds"]),
        )


@dataclass
class RoundMemo:
    """Results the mechanism can recompute, kept while their inputs are unchanged.

    Each entry is keyed on the identity of the objects it was built from: the core
    hands every snapshot the same node tuple until a node comes or goes, and replaces
    (never edits) a job's throughput row; :class:`RoundState` replaces its rows at
    each reset. An entry whose key objects are gone is simply rebuilt, so clearing the
    memo at any moment changes no answer (``tests/unit/test_round_caches.py``).
    """

    type_orders: TypeOrder = field(default_factory=TypeOrder)
    run_cache: dict[str, tuple[tuple[Row, ...], set[GpuType]]] = field(default_factory=dict)
    row_src: dict[JobId, object] = field(default_factory=dict)
    """Per job: the view's throughput mapping its row in ``row_of`` was built from."""
    row_of: dict[JobId, Row] = field(default_factory=dict)
    row_gpus: Mapping[GpuType, int] | None = None
    """The GPU-count mapping ``row_of`` was built for (its types are the rows' keys)."""
    gpus_cache: tuple[tuple[Node, ...], frozenset[str], dict[GpuType, int]] | None = None
    capacity_cache: tuple[tuple[Node, ...], dict[GpuType, int]] | None = None
    """The training pool's GPUs per type, for the node tuple it was counted on."""
    pairs_cache: tuple[object, list[tuple[str, tuple[JobId, ...]]]] | None = None
    entry_cache: tuple[tuple[object, ...], list[str], list[EntryRow], object] | None = None
    """The last round's entry rows; they hold the bookkeeping's inner dicts, which later
    rounds update in place, so they stay valid while those dicts are the same objects.
    The last item is the throughput-rows dict they were built for (see ``rows_out``)."""
    rows_out: dict[JobId, Row] | None = None
    """The last round's throughput rows by job, handed out again (the same object) while
    every job and row in it is the same: later steps then skip their own checks."""
    active_cache: tuple[tuple[JobView, ...], dict[JobId, JobView]] | None = None
    """The active jobs by id of the last snapshot's job tuple."""
    index: EntryIndex | None = None
    """The ranking's columns (:mod:`lyra_ray.scheduling.round_rank`), for large queues."""

    @staticmethod
    def _row(snap: ClusterSnapshot, job: JobView, types: Mapping[GpuType, int]) -> Row:
        """steps/s per GPU type: the core's cached row, else the throughput model."""
        row = job.throughput
        if all(g in row for g in types):
            return {g: float(row[g]) for g in types}
        return {g: snap.throughput(job, g) for g in types}

    def throughput_rows(
        self, snap: ClusterSnapshot, active: Mapping[JobId, JobView], gpus: Mapping[GpuType, int]
    ) -> dict[JobId, Row]:
        """``_row`` of every active job, reused while the job's row and the GPU types are
        the same objects (the core replaces a row, it never edits one). While every job
        and its row are the ones of the last call, in the same order, that call's dict
        comes back (the same object, never edited), so the type order and the entry rows
        can tell "nothing changed" by identity. A changed row drops the entry rows.

        The walks over the jobs are C-level (``map``/``compress``): live, 10,000 queued
        jobs come through here on every backfill, and a few of them changed."""
        if self.row_gpus is not gpus:
            self.row_src, self.row_of, self.row_gpus = {}, {}, gpus
        src, rows = self.row_src, self.row_of
        keys = list(active)
        now = list(map(_THROUGHPUT, active.values()))
        stale = list(compress(range(len(keys)), map(is_not, now, map(src.get, keys))))
        last = self.rows_out
        if not stale and last is not None and len(last) == len(keys) and keys == list(last):
            return last
        uncached = False
        for i in stale:
            jid, job = keys[i], active[keys[i]]
            row, old = self._row(snap, job, gpus), rows.get(jid)
            if old is not None and old != row:
                # :class:`TypeOrder` keeps its order while the job set is the same: a
                # job's new speeds must reach it (clearing a memo changes no answer)
                self.type_orders = TypeOrder()
            rows[jid] = row
            if all(g in now[i] for g in gpus):
                src[jid] = now[i]
            else:  # the model answered: not cached, asked again next call
                src.pop(jid, None)
                uncached = True
        if len(rows) != len(keys):
            for jid in rows.keys() - active.keys():
                del rows[jid]
                src.pop(jid, None)
        self.entry_cache = None
        out = dict(zip(keys, map(rows.__getitem__, keys), strict=True))
        self.rows_out = None if uncached else out  # every row cached
        return out

    def clear(self) -> None:
        fresh = RoundMemo()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
