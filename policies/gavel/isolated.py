"""Gavel's ``isolated`` policy: every job gets an equal share of every GPU type.

The baseline LAS normalises by: no solver, ``X_mj = G_j / (n sf_m)`` scaled so rows sum
to at most one (see :func:`lyra_ray.policies.gavel.inputs.isolated_allocation`).
"""

from __future__ import annotations

from typing import ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.inputs import build_problem, isolated_allocation, to_allocation


@register
class Isolated(PolicyBase):
    name: ClassVar[str] = "isolated"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        return to_allocation(p, isolated_allocation(p.sf, p.capacity, feasible=True) * p.runnable)
