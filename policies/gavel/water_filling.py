"""Hierarchical max-min fairness by water-filling: ``max_min_fairness_water_filling[_perf]``.

Two levels: entities (``JobSpec.user``) share the cluster equally; inside an entity,
jobs share the entity's part in proportion to their priority weights. So job m's
weight is ``w_m / sum_{m' in e} w_m'`` and its utility is LAS's normalised throughput
divided by that weight. Unlike plain LAS (one LP, leftovers unassigned), water-filling
is Pareto-efficient: raise the common level with an LP, freeze the jobs that cannot go
higher, repeat with the rest. Gavel finds the frozen jobs with a MILP per iteration; a
job whose ``utility >= level`` row has a positive dual is at that level in *every*
optimal solution, hence a bottleneck, so the duals of the same LP identify them and
each iteration is one warm-started LP (:mod:`policies.gavel.warm`). Every
iteration freezes at least one job (duals sum to 1).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from policies.base import register
from policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from policies.gavel.lp import SolverError, base_constraints, utility_matrix
from policies.gavel.max_min_fairness import las_coefficients
from policies.gavel.warm import WarmMaxMin

log = logging.getLogger(__name__)


def hierarchical_weights(p: Problem) -> FloatArray:
    """Job weight inside a two-level (entity, job) hierarchy; entities weigh 1 each."""
    totals: dict[str, float] = defaultdict(float)
    for i, job in enumerate(p.jobs):
        totals[job.spec.user] += float(p.weights[i])
    return np.array([p.weights[i] / totals[j.spec.user] for i, j in enumerate(p.jobs)]).reshape(p.n)


def water_fill(
    U: sp.csr_matrix,
    A: sp.csr_matrix,
    b: FloatArray,
    ub: FloatArray,
    active: NDArray[np.bool_],
    dual_tol: float = 1e-9,
) -> tuple[FloatArray, FloatArray]:
    """Max-min fair utilities of ``U x`` under ``A x <= b``; returns (x, level per job)."""
    n = U.shape[0]
    lp = WarmMaxMin(U, A, b, ub, demand=active.astype(np.float64))
    frozen = ~active
    level = np.zeros(n)
    x = np.zeros(U.shape[1])
    while not frozen.all():
        try:
            x, t, duals = lp.solve()
        except SolverError:
            # Numerical trouble after many warm re-solves (floors a hair too high): keep
            # the last feasible allocation and freeze the rest where it leaves them.
            log.warning("water-filling stopped early with %d jobs unfrozen", int((~frozen).sum()))
            util = np.asarray(U @ x).ravel()
            level[~frozen] = util[~frozen]
            break
        free = ~frozen
        newly = free & (duals > dual_tol)
        if not newly.any():
            newly = free
        level[newly] = t
        lp.freeze(np.flatnonzero(newly), level[newly] * (1 - 1e-7))
        frozen = frozen | newly
    return x, level


def solve_water_filling(p: Problem, agnostic: bool) -> tuple[FloatArray, FloatArray]:
    coef = las_coefficients(p, agnostic) * (p.weights / hierarchical_weights(p))[:, None]
    A, b = base_constraints(p.sf, p.capacity)
    ub = p.runnable.astype(np.float64).ravel()
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    x, level = water_fill(utility_matrix(coef), A, b, ub, active)
    return x.reshape(p.n, p.k), level


@register
class MaxMinFairnessWaterFillingPerf:
    """Hierarchical, heterogeneity-aware, Pareto-efficient max-min fairness."""

    name: ClassVar[str] = "max_min_fairness_water_filling_perf"
    agnostic: ClassVar[bool] = False

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=self.agnostic)
        if p.n == 0 or p.k == 0:
            return Allocation()
        X, _ = solve_water_filling(p, self.agnostic)
        return to_allocation(p, X)


@register
class MaxMinFairnessWaterFilling(MaxMinFairnessWaterFillingPerf):
    name: ClassVar[str] = "max_min_fairness_water_filling"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
