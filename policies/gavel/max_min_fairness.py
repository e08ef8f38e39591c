"""Least attained service, heterogeneity-aware: Gavel's ``max_min_fairness[_perf]``.

Gavel's LAS maximises the minimum over jobs of ``sf_m * throughput(m, X) / (w_m *
iso_m)``: each job's effective throughput relative to what an equal ("isolated") share
of the cluster would give it, times its scale factor (a job on one GPU should get
``sf`` times the time of an equal job on ``sf`` GPUs), divided by its priority weight.
The agnostic variant sets every throughput to 1 and drops the normalisation, so it
only balances time. Like Gavel, it is a single LP (no water-filling); the round
mechanism hands GPUs the LP leaves idle to the next jobs in priority order.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.ecos_las import EcosFailed, solve_las_ecos
from lyra_ray.policies.gavel.inputs import (
    FloatArray,
    Problem,
    build_problem,
    isolated_allocation,
    to_allocation,
)
from lyra_ray.policies.gavel.las_incremental import IncrementalLas
from lyra_ray.policies.gavel.lp import base_constraints, max_min, max_min_jobs, utility_matrix
from lyra_ray.policies.gavel.team_rows import with_rows

log = logging.getLogger(__name__)

WARM = "warm-simplex"
ECOS = "ecos"


def las_coefficients(p: Problem, agnostic: bool) -> FloatArray:
    """``c_mj`` such that job m's LAS utility is ``sum_j c_mj X_mj``."""
    if agnostic:
        iso = np.ones(p.n)
    else:
        iso = (p.T * isolated_allocation(p.sf, p.capacity)).sum(axis=1)
        iso = np.where(iso > 0, iso, 1.0)
    coef: FloatArray = p.T * (p.sf / (p.weights * iso))[:, None]
    return coef * p.runnable


def solve_las(
    p: Problem, agnostic: bool, pareto: bool = False, method: str = ECOS
) -> tuple[FloatArray, float]:
    """The LAS LP; returns (X, optimal level).

    ``method``: ``"ecos"`` (default) is Gavel's own formulation and solver
    (:mod:`lyra_ray.policies.gavel.ecos_las`); the HiGHS methods of :func:`lp.solve_min`
    (``"ipm-interior"``, ``"ipm"``, ``"simplex"``) build it as a bounded LP instead. The
    Pareto second stage always runs on HiGHS.

    (Solving over classes of identical jobs instead would give the same optimum but a
    different interior point — the barrier weighs a class once instead of per job — and
    so different simulated JCTs than Gavel's per-job LP; per-job it is.)

    Teams' quota rows (``p.team_rows``) join the constraints; that LP goes to HiGHS's
    barrier without crossover (``ipm-interior``), an interior point as ECOS's is.
    """
    coef = las_coefficients(p, agnostic)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    if not active.any():
        return np.zeros((p.n, p.k)), 0.0
    if p.team_rows:
        A, b = with_rows(*base_constraints(p.sf, p.capacity), p)
        res = max_min(
            utility_matrix(coef),
            A,
            b,
            p.runnable.astype(np.float64).ravel(),
            active=active,
            floor=np.zeros(p.n),
            pareto=pareto,
            method="ipm-interior" if method in (ECOS, WARM) else method,
        )
        return res.x.reshape(p.n, p.k), res.level
    if method == ECOS:
        if not pareto:
            try:
                X, level, _ = solve_las_ecos(coef, p.sf, p.capacity, p.runnable)
                return X, level
            except EcosFailed as e:  # HiGHS's barrier: the same LP, another interior point
                log.warning("LAS LP: %s; solving it with HiGHS instead", e)
        method = "ipm-interior"
    ub = p.runnable.astype(np.float64).ravel()
    if not pareto:  # the same LP without scipy's per-matrix overhead
        res = max_min_jobs(coef, p.sf, p.capacity, ub, active, method=method)
        return res.x.reshape(p.n, p.k), res.level
    A, b = base_constraints(p.sf, p.capacity)
    res = max_min(
        utility_matrix(coef),
        A,
        b,
        ub,
        active=active,
        floor=np.zeros(p.n),
        pareto=pareto,
        method=method,
    )
    return res.x.reshape(p.n, p.k), res.level


@register
class MaxMinFairnessPerf(PolicyBase):
    """Heterogeneity-aware LAS (Gavel: ``max_min_fairness_perf``)."""

    name: ClassVar[str] = "max_min_fairness_perf"
    agnostic: ClassVar[bool] = False

    def __init__(self, pareto: bool = False, method: str | None = None) -> None:
        self.pareto = pareto
        self.method = method or self.default_method
        self._live: tuple[tuple[str, ...], IncrementalLas] | None = None

    default_method: ClassVar[str] = ECOS
    """A method of :func:`solve_las` (``ecos``: Gavel's LP and solver, an interior point
    of the optimal face; ``ipm-interior``: HiGHS's barrier without crossover, another
    interior point, slower on the many small LPs a simulation solves), or ``WARM``: one
    live HiGHS model re-solved by warm dual simplex, which returns an optimal *vertex*
    that depends on the history of the model, so the JCTs differ somewhat from the
    interior-point methods'. ECOS is the default: it is Gavel's own LP and solver
    (docs/gavel.md compares the methods' JCTs with Gavel's)."""

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=self.agnostic)
        if p.n == 0 or p.k == 0:
            return Allocation()
        if self.method == WARM and not self.pareto and not p.team_rows:
            X = self._solve_warm(p)
        else:
            X, _ = solve_las(p, self.agnostic, self.pareto, self.method)
        return to_allocation(p, X)

    def _solve_warm(self, p: Problem) -> FloatArray:
        """The LAS LP on this policy's live model (rebuilt when the GPU types change)."""
        if self._live is None or self._live[0] != p.gpu_types:
            self._live = (p.gpu_types, IncrementalLas(p.k))
        coef = las_coefficients(p, self.agnostic)
        runnable = p.runnable
        active: NDArray[np.bool_] = np.asarray(runnable.any(axis=1))
        if not active.any():
            return np.zeros((p.n, p.k))
        X, _ = self._live[1].solve(
            p.job_ids, coef, p.sf, p.capacity, runnable.astype(np.float64), active
        )
        return X


@register
class MaxMinFairness(MaxMinFairnessPerf):
    """Heterogeneity-agnostic LAS (Gavel: ``max_min_fairness``): balances time only."""

    name: ClassVar[str] = "max_min_fairness"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
