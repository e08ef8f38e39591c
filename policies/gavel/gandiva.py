"""Gandiva (OSDI'18) as Gavel models it: agnostic time sharing plus greedy packing.

Every job starts from the isolated equal share. Jobs are then visited in a seeded
random order; a job still alone is packed with the first other lone job (same
scale factor) whose pair gains on some GPU type (normalised co-located throughput sum
> 1), and the pair takes over the smaller of the two jobs' shares on each type. This
mirrors Gandiva's opportunistic, introspection-driven packing without Gavel's
heterogeneity-aware optimisation; docs/gavel.md lists it as an approximation.
"""

from __future__ import annotations

import random
from typing import ClassVar

import numpy as np

from lyra_ray.model import Allocation, ClusterSnapshot
from policies.base import PolicyBase, register
from policies.gavel.inputs import build_problem, isolated_allocation, to_allocation
from policies.gavel.pairs import candidate_pairs


@register
class Gandiva(PolicyBase):
    name: ClassVar[str] = "gandiva"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""

    def __init__(self, seed: int = 0, top_k: int = 8) -> None:
        self.seed = seed
        self.top_k = top_k

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=False)
        if p.n == 0 or p.k == 0:
            return Allocation()
        X = isolated_allocation(p.sf, p.capacity, feasible=True) * p.runnable
        cands = candidate_pairs(snap, p, self.top_k)
        partners: dict[int, list[int]] = {}
        for i, (a, b) in enumerate(cands.idx):
            if p.sf[a] == p.sf[b]:
                partners.setdefault(int(a), []).append(i)
                partners.setdefault(int(b), []).append(i)
        order = list(range(p.n))
        random.Random(f"gandiva:{self.seed}:{snap.now}").shuffle(order)
        alone = set(range(p.n))
        packed: dict[str, np.ndarray] = {}
        for a in order:
            if a not in alone:
                continue
            for i in partners.get(a, []):
                x, y = (int(v) for v in cands.idx[i])
                other = y if x == a else x
                if other not in alone:
                    continue
                ok = (cands.thr[i] > 0).all(axis=1)
                share = np.minimum(X[x], X[y]) * ok
                if share.sum() <= 0:
                    continue
                X[x] -= share
                X[y] -= share
                packed[cands.keys[i]] = share
                alone -= {x, y}
                break
        return to_allocation(p, X, packed)
