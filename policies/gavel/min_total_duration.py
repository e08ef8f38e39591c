"""Minimise makespan: Gavel's ``min_total_duration[_perf]`` as a single LP.

Gavel bisects over the makespan M with a feasibility problem per step. Here it is one
LP in "time spent" variables ``Y = M X`` (seconds job m runs on type j until the
makespan): finishing is ``sum_j (T_mj / r_m) Y_mj >= 1`` with no M in it, and the
time and capacity rows become ``sum_j Y_mj <= M`` and ``sum_m sf_m Y_mj <= cap_j M``
(``X <= 1`` follows from the time row). Minimise M. Unlike the ``theta = 1/M``
max-min form (one dense theta column coupling every job's row), dual simplex
from the slack basis then needs only a few pivots per job and no presolve, which
makes it faster than interior point on this LP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.ecos_centre import gavel_makespan
from lyra_ray.policies.gavel.highs_model import INF, pass_lp, run_simplex
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import new_highs
from lyra_ray.policies.gavel.team_rows import rows_of_jobs

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


def makespan_lp(rate: FloatArray, sf: FloatArray, capacity: FloatArray) -> tuple[FloatArray, float]:
    """Min-makespan X and M, for jobs that each run somewhere (every row of ``rate``,
    the fraction of the job done per second on each type, has a positive entry)."""
    n, k = rate.shape
    best = rate.max(axis=1)
    # Units: each finishing row divided by its best rate (its coefficients in (0, 1]),
    # and time measured in tau0 = the longest job's time alone on its best type, so
    # every right-hand side lies in (0, 1] and M / tau0 >= 1.
    tau0 = float((1.0 / best).max())
    jk = np.arange(n * k)
    m_col = n * k
    rows = np.concatenate(
        [jk // k, n + jk // k, 2 * n + jk % k, n + np.arange(n), 2 * n + np.arange(k)]
    )
    cols = np.concatenate([jk, jk, jk, np.full(n, m_col), np.full(k, m_col)])
    vals = np.concatenate(
        [(rate / best[:, None]).ravel(), np.ones(n * k), np.repeat(sf, k), -np.ones(n), -capacity]
    )
    nrow, ncol = 2 * n + k, n * k + 1
    A = sp.csc_matrix((vals, (rows, cols)), shape=(nrow, ncol))
    cost = np.zeros(ncol)
    cost[-1] = 1.0
    h = new_highs()
    pass_lp(
        h,
        A,
        cost,
        (np.zeros(ncol), np.concatenate([np.where(rate.ravel() > 0, INF, 0.0), [INF]])),
        (
            np.concatenate([1.0 / (best * tau0), np.full(n + k, -INF)]),
            np.concatenate([np.full(n, INF), np.zeros(n + k)]),
        ),
    )
    y = run_simplex(h)
    m_scaled = float(y[-1])
    X = np.clip(y[:-1].reshape(n, k) / m_scaled, 0.0, 1.0)
    return X, m_scaled * tau0


def solve_makespan(p: Problem) -> tuple[FloatArray, float]:
    """Returns (X, makespan in seconds) over the jobs that can run."""
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    X = np.zeros((p.n, p.k))
    if not active.any():
        return X, 0.0
    rate = (p.T * p.runnable)[active] / r[active, None]
    X[active], makespan = makespan_lp(rate, p.sf[active], p.capacity)
    return X, makespan


@register
class MinTotalDurationPerf(PolicyBase):
    """Heterogeneity-aware makespan minimisation (Gavel: ``min_total_duration_perf``).

    The allocation is the one Gavel's bisection returns
    (:mod:`lyra_ray.policies.gavel.ecos_centre`), not the optimal vertex of the LP above: the
    rounds realise whichever X the policy gives, and Gavel's is an interior point at a
    makespan within 5 % of the optimum. :func:`solve_makespan` remains the exact optimum.
    """

    name: ClassVar[str] = "min_total_duration_perf"
    agnostic: ClassVar[bool] = False
    reference_type: ClassVar[str] = "v100"

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        T = p.T
        if self.agnostic:  # Gavel: the reference type's throughput on every type
            ref = (
                T[:, p.gpu_types.index(self.reference_type)]
                if self.reference_type in p.gpu_types
                else T.max(axis=1)
            )
            T = np.repeat(ref[:, None], p.k, axis=1)
        r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
        runs = np.asarray((T > 0).any(axis=1)) & ~p.closed
        X = np.zeros((p.n, p.k))
        if runs.any():
            X[runs] = gavel_makespan(
                T[runs], p.sf[runs], p.capacity, r[runs], rows_of_jobs(p, runs)
            )
        # Gavel's X may sit on types where the job cannot run (it has a variable there);
        # the rounds never use such entries, so they are dropped.
        return to_allocation(p, X * p.runnable)


@register
class MinTotalDuration(MinTotalDurationPerf):
    """Agnostic variant (Gavel: ``min_total_duration``): the reference type's throughput
    (``v100``, else the job's fastest) on every type, as Gavel's."""

    name: ClassVar[str] = "min_total_duration"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
