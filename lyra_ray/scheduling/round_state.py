"""The round mechanism's two kinds of memory, kept apart on purpose.

:class:`RoundState` is what a round's answer depends on: it is persisted, and a restored
mechanism decides exactly as the one that saved it. :class:`RoundMemo` only saves time:
it may be cleared at any moment without changing an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from lyra_ray.model import GpuType, JobId, Node
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
    entry_cache: tuple[tuple[object, ...], list[str], list[EntryRow]] | None = None
    """The last round's entry rows; they hold the bookkeeping's inner dicts, which later
    rounds update in place, so they stay valid while those dicts are the same objects."""

    def clear(self) -> None:
        fresh = RoundMemo()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
