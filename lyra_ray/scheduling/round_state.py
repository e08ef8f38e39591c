"""The round mechanism's two kinds of memory, kept apart on purpose.

:class:`RoundState` is what a round's answer depends on: it is persisted, and a restored
mechanism decides exactly as the one that saved it. :class:`RoundMemo` only saves time:
it may be cleared at any moment without changing an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView, Node
from lyra_ray.scheduling.round_greedy import EntryRow, Row
from lyra_ray.scheduling.type_order import TypeOrder


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
    rounds: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe plain dicts (``seen`` holds the snapshot views' own mappings)."""
        return {
            "job_time": self.job_time,
            "worker_time": self.worker_time,
            "deficits": self.deficits,
            "alloc_ref": self.alloc_ref,
            "seen": {k: dict(v) for k, v in self.seen.items()},
            "job_set": self.job_set,
            "last_reset": self.last_reset,
            "rounds": self.rounds,
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
    row_cache: dict[JobId, tuple[object, object, Row]] = field(default_factory=dict)
    gpus_cache: tuple[tuple[Node, ...], frozenset[str], dict[GpuType, int]] | None = None
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
        can tell "nothing changed" by identity. A changed row drops the entry rows."""
        cache = self.row_cache
        last = self.rows_out
        if last is not None and len(cache) == len(active):
            for (jid, job), (cjid, kept) in zip(active.items(), cache.items(), strict=True):
                if jid != cjid or kept[0] is not job.throughput or kept[1] is not gpus:
                    break
            else:
                return last
        fresh: dict[JobId, tuple[object, object, Row]] = {}
        out: dict[JobId, Row] = {}
        for jid, job in active.items():
            src = job.throughput
            hit = cache.get(jid)
            if hit is not None and hit[0] is src and hit[1] is gpus:
                row = hit[2]
            else:
                self.entry_cache = None
                row = self._row(snap, job, gpus)
                if not all(g in src for g in gpus):  # the model answered: do not cache
                    out[jid] = row
                    continue
            fresh[jid] = (src, gpus, row)
            out[jid] = row
        if len(fresh) != len(cache):
            self.entry_cache = None
        self.row_cache = fresh
        self.rows_out = out if len(out) == len(fresh) else None  # every row cached
        return out

    def clear(self) -> None:
        fresh = RoundMemo()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
