"""Maximise total throughput: Gavel's ``max_sum_throughput_perf``.

``max sum_m sum_j T_mj X_mj / cost_j`` over the base constraints, optionally with SLO
rows ``throughput(m, X) >= remaining_m / time_left_m``. Gavel sums raw steps/s (its
normalising ``scale`` is computed and unused); so does this module. ``cost.py`` builds
the cost-normalised and SLO variants on :func:`solve_sum`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.ecos_centre import ecos_point
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import SolverError, base_constraints, solve_min, utility_matrix
from lyra_ray.policies.gavel.team_rows import rows_of_jobs, with_rows

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


def solve_sum(
    p: Problem,
    cost: FloatArray | None = None,
    min_throughput: Mapping[int, float] | None = None,
) -> tuple[FloatArray, float]:
    """Returns (X, objective). ``min_throughput``: row index -> steps/s floor (SLOs).

    If the SLO rows make the LP infeasible they are dropped, as Gavel does.
    """
    T = p.T * p.runnable
    per_type = np.ones(p.k) if cost is None else cost
    c = -(T / per_type[None, :]).ravel()
    A, b = with_rows(*base_constraints(p.sf, p.capacity), p)
    ub = p.runnable.astype(np.float64).ravel()
    if min_throughput:
        rows = np.array(sorted(min_throughput), dtype=np.int64)
        U = utility_matrix(T)[rows]
        A2 = sp.vstack([A, -U]).tocsr()
        b2 = np.concatenate([b, -np.array([min_throughput[int(i)] for i in rows])])
        try:
            x, _ = solve_min(c, A2, b2, ub)
            return x.reshape(p.n, p.k), float(-c @ x)
        except SolverError:
            pass
    x, _ = solve_min(c, A, b, ub)
    return x.reshape(p.n, p.k), float(-c @ x)


@register
class MaxSumThroughputPerf(PolicyBase):
    """Heterogeneity-aware total-throughput maximisation."""

    name: ClassVar[str] = "max_sum_throughput_perf"

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        X, _ = solve_sum(p)
        return to_allocation(p, centre_of_sum(p, X))


def centre_of_sum(p: Problem, X: FloatArray, cost: FloatArray | None = None) -> FloatArray:
    """The optimal X Gavel's solver returns: ECOS on the same LP stops near the centre of
    the optimal face, HiGHS at a vertex, and the rounds realise different schedules from
    the two (``finish_time_fairness.centre_of_optimum`` says more). ``X`` if ECOS fails."""
    per_type = np.ones(p.k) if cost is None else cost
    T = p.T * p.runnable
    centre = ecos_point(
        -(T / per_type[None, :]).ravel(), T, p.sf, p.capacity, extra=rows_of_jobs(p)
    )
    return X if centre is None else centre * p.runnable
