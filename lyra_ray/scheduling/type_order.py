"""The order in which a round hands out GPU types: fastest first.

Gavel hard-codes v100, p100, k80. Here a type's speed is the sum over the active jobs of
their throughput there relative to their best type, so any accelerator set orders itself.
A round runs every few simulated minutes and the job set changes only on arrivals and
completions, so :class:`TypeOrder` keeps the order, and each job's relative speeds, until
what they were computed from changes (bit-identical to recomputing: same sums, same order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lyra_ray.model import GpuType, JobId
from lyra_ray.scheduling.round_greedy import Row

Speeds = tuple[tuple[GpuType, float], ...]


def relative_speeds(row: Row) -> Speeds:
    """A job's throughput on each type relative to its best type (empty if it runs nowhere)."""
    best = max(row.values(), default=0.0)
    if best <= 0:
        return ()
    return tuple((g, v / best) for g, v in row.items())


def order_by_speed(speeds: Iterable[Speeds], gpus: Mapping[GpuType, int]) -> list[GpuType]:
    """GPU types with GPUs, fastest first, from every job's :func:`relative_speeds`."""
    speed = dict.fromkeys(gpus, 0.0)
    for per_job in speeds:
        for g, v in per_job:
            speed[g] += v
    return sorted((g for g, c in gpus.items() if c > 0), key=lambda g: (-speed[g], g))


def fastest_first(rows: Iterable[Row], gpus: Mapping[GpuType, int]) -> list[GpuType]:
    """GPU types with GPUs, fastest first (the uncached definition)."""
    return order_by_speed(map(relative_speeds, rows), gpus)


class TypeOrder:
    """:func:`fastest_first` over the active jobs' rows, cached.

    The order is kept while the job set and the GPU-count mapping (one object per node set)
    are the same; each job's relative speeds while its row is the same object (the round
    mechanism replaces a row, it never edits one).
    """

    def __init__(self) -> None:
        self._order: tuple[frozenset[JobId], object, list[GpuType], object] | None = None
        self._speeds: dict[JobId, tuple[Row, Speeds]] = {}

    def order(self, rows: Mapping[JobId, Row], gpus: Mapping[GpuType, int]) -> list[GpuType]:
        """A fresh list (the caller may shuffle it). ``rows`` handed in again as the same
        object (the round mechanism's unchanged rows, never edited) is known unchanged."""
        c = self._order
        if c is not None and c[3] is rows and c[1] is gpus:
            return list(c[2])
        if c is None or c[1] is not gpus or rows.keys() != c[0]:
            c = (frozenset(rows), gpus, order_by_speed(self._all_speeds(rows), gpus), rows)
        else:
            c = (c[0], gpus, c[2], rows)
        self._order = c
        return list(c[2])

    def _all_speeds(self, rows: Mapping[JobId, Row]) -> list[Speeds]:
        cache = self._speeds
        fresh: dict[JobId, tuple[Row, Speeds]] = {}
        out: list[Speeds] = []
        for jid, row in rows.items():
            hit = cache.get(jid)
            sp = hit[1] if hit is not None and hit[0] is row else relative_speeds(row)
            fresh[jid] = (row, sp)
            out.append(sp)
        self._speeds = fresh
        return out
