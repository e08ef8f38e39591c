"""Lyra with perfect foresight of serving demand, for ``benchmarks/lyra_loan_oracle.py``.

Simulator only: no live scheduler knows the serving day ahead. It bounds what any
forecast could buy the loan rule (``loan_max_remaining_s``), so it lives beside the
benchmark, not among the policies.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.lyra.two_phase import LyraPolicy


def next_reclaim_s(
    times: Sequence[float], servers: Sequence[int], now: float, inference: int, lent: int
) -> float:
    """Seconds from ``now`` until serving needs more than the ``inference - lent``
    servers it keeps, i.e. until a server lent now is reclaimed (``inf``: never within
    the series). With nothing lent, until demand rises above its level now."""
    i = max(bisect.bisect_right(times, now) - 1, 0)
    keep = inference - lent if lent else servers[i]
    for t, v in zip(times[i + 1 :], servers[i + 1 :], strict=True):
        if v > keep:
            return t - now
    return math.inf


class OracleLyra(LyraPolicy):
    """Lyra's defaults, but a job starts on a lent server only if it is expected to end
    before serving next takes back a server lent now (the true future, each step)."""

    def __init__(self, demand: Sequence[tuple[float, int]]) -> None:
        super().__init__()
        self.times = [t for t, _ in demand]
        self.servers = [v for _, v in demand]

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        inference = sum(1 for n in snap.nodes if n.pool == "inference")
        self.loan_max_remaining_s = next_reclaim_s(
            self.times, self.servers, snap.now, inference, len(snap.lent_nodes)
        )
        return super().allocate(snap)
