"""What the nodes lyra asked for have cost so far: node-seconds per node type.

Only nodes above a type's ``min_workers`` count: the autoscaler keeps those whatever
lyra asks, so they are the cluster's fixed cost, not the budget's. The runtime accrues
after every scheduling cycle from the nodes that are up, and keeps the total beside the
scheduler's state (a restarted scheduler continues the count; the time it was down is
accrued at the node count it finds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.node_types import NodeType


@dataclass(frozen=True)
class Spend:
    node_seconds: Mapping[str, float] = field(default_factory=dict)
    """Per node type name: seconds of its nodes above ``min_workers``."""

    def node_hours(self) -> float:
        return sum(self.node_seconds.values()) / 3600.0

    def usd(self, types: tuple[NodeType, ...]) -> float:
        price = {t.name: t.usd_per_hour for t in types}
        return sum(s / 3600.0 * price.get(k, 0.0) for k, s in self.node_seconds.items())

    def to_dict(self) -> dict[str, Any]:
        return {"node_seconds": dict(sorted(self.node_seconds.items()))}

    @classmethod
    def from_dict(cls, raw: Any) -> Spend:
        """A saved spend; anything unreadable counts as nothing spent (logged by the caller)."""
        ns = raw.get("node_seconds") if isinstance(raw, Mapping) else None
        if not isinstance(ns, Mapping):
            return cls()
        ok = {
            str(k): float(v)
            for k, v in ns.items()
            if isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v >= 0
        }
        return cls(ok)


def accrue(
    spend: Spend, counts: Mapping[str, int], types: tuple[NodeType, ...], seconds: float
) -> Spend:
    """``spend`` plus ``seconds`` of the nodes ``counts`` (per node type) above each
    type's ``min_workers``."""
    if not (math.isfinite(seconds) and seconds > 0):
        return spend
    out = dict(spend.node_seconds)
    for t in types:
        above = max(0, counts.get(t.name, 0) - t.min_workers)
        if above:
            out[t.name] = out.get(t.name, 0.0) + above * seconds
    return Spend(out)
