"""Gandiva (OSDI'18) as Gavel's simulator runs it: ``gandiva`` (Gavel's ``GandivaPolicy``).

Heterogeneity-agnostic time sharing with random packing, only under pressure:

* if the active jobs' GPUs fit in the cluster (sum of scale factors <= GPUs), every job
  gets Gavel's isolated equal split (``X_mj = G_j / (n sf_m)``, each row divided by its
  own sum when that exceeds 1) and nothing is packed;
* otherwise jobs not yet grouped are paired at random — ``random.Random(seed).sample``
  of two jobs from the ungrouped ones, in id order, at most that many draws, a draw of
  two different scale factors wasted — and the leftovers stay alone; the equal split is
  then over groups (pairs and lone jobs), a pair getting the share of one job.

Pairs are kept across recomputations (this is the policy's state) until a member ends or
the pair stops paying: Gavel drops a pair whose co-located throughputs, normalised by
each job's alone throughput and summed over *all* GPU types, fall below 1, or that
cannot share some type at all (that sum is then 0); a lone job is regrouped every time.
Gavel's name for it, ``Gandiva_Packing``, has "Packing" in it, so rounds do not shuffle
the GPU types.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from lyra_ray.model import Allocation, ClusterSnapshot, JobId, JobView, pair_key
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.inputs import FloatArray, build_problem


def equal_split(capacity: FloatArray, sf: FloatArray) -> FloatArray:
    """Gavel's isolated split over ``len(sf)`` groups: ``G_j / (m sf)``, rows capped at 1."""
    m = sf.shape[0]
    x = np.tile(capacity / max(m, 1), (m, 1)) / sf[:, None]
    out: FloatArray = x / np.maximum(x.sum(axis=1), 1.0)[:, None]
    return out


@register
class Gandiva(PolicyBase):
    name: ClassVar[str] = "gandiva"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._groups: dict[JobId, JobId | None] = {}
        """Each grouped job's partner (``None``: alone), as Gavel's ``_assigned_combinations``."""

    def to_state(self) -> dict[str, Any]:
        version, internal, gauss = self._rng.getstate()
        return {
            "groups": dict(sorted(self._groups.items())),
            "rng": [version, list(internal), gauss],
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        groups = state.get("groups", {})  # a state saved before #18 is empty
        self._groups = {str(j): (None if o is None else str(o)) for j, o in groups.items()}
        self._rng = random.Random(self.seed)
        if "rng" in state:
            v, internal, gauss = state["rng"]
            self._rng.setstate((int(v), tuple(int(x) for x in internal), gauss))

    def _gain(self, snap: ClusterSnapshot, a: JobView, b: JobView, types: list[str]) -> float:
        """Gavel's ``_get_normalized_throughput``: summed over all types, 0 if any type
        cannot host the pair."""
        total = 0.0
        for gt in types:
            pt = snap.throughput_model.pair_throughput(a.spec, b.spec, gt)
            if pt is None:
                return 0.0
            for member, shared in zip((a, b), pt, strict=True):
                if shared <= 0:
                    return 0.0
                alone = snap.throughput(member, gt)
                total += shared / alone if alone > 0 else 0.0
        return total

    def _prune(
        self, snap: ClusterSnapshot, active: Mapping[JobId, JobView], types: list[str]
    ) -> None:
        drop: set[JobId] = set()
        for jid, other in self._groups.items():
            # A finished member ends the group; a lone job (gain 0) is regrouped anew.
            keep = (
                jid in active
                and other is not None
                and other in active
                and self._gain(snap, active[jid], active[other], types) >= 1.0
            )
            if not keep:
                drop.update(x for x in (jid, other) if x is not None)
        for jid in drop:
            self._groups.pop(jid, None)

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        types = list(p.gpu_types)
        active = {j.id: j for j in p.jobs}
        row = {j.id: i for i, j in enumerate(p.jobs)}
        self._prune(snap, active, types)
        fractions: dict[str, dict[str, float]] = {}
        if p.sf.sum() <= p.capacity.sum():  # everyone fits: no packing
            X = equal_split(p.capacity, p.sf) * p.runnable
            for i, job in enumerate(p.jobs):
                fractions[job.id] = {g: float(X[i, j]) for j, g in enumerate(types)}
            return Allocation(fractions=fractions)
        ungrouped = [j.id for j in sorted(p.jobs, key=lambda j: (j.arrival_s, j.id))]
        ungrouped = [j for j in ungrouped if j not in self._groups]
        for _ in range(len(ungrouped)):
            if len(ungrouped) < 2:
                break
            a, b = self._rng.sample(ungrouped, 2)
            if p.sf[row[a]] != p.sf[row[b]]:
                continue
            ungrouped.remove(a)
            ungrouped.remove(b)
            self._groups[a], self._groups[b] = b, a
        for jid in ungrouped:
            self._groups[jid] = None
        groups = sorted(
            {(jid,) if o is None else tuple(sorted((jid, o))) for jid, o in self._groups.items()}
        )
        share = equal_split(p.capacity, np.array([p.sf[row[g[0]]] for g in groups]))
        zero = dict.fromkeys(types, 0.0)
        for job in p.jobs:
            fractions[job.id] = dict(zero)
        for g, xs in zip(groups, share, strict=True):
            key = g[0] if len(g) == 1 else pair_key(g[0], g[1])
            fractions[key] = {t: float(xs[j]) for j, t in enumerate(types)}
        for job in p.jobs:  # a lone job's share only where it can run, as elsewhere
            i = row[job.id]
            fractions[job.id] = {
                t: v * float(p.runnable[i, j]) for j, (t, v) in enumerate(fractions[job.id].items())
            }
        return Allocation(fractions=fractions)
