"""Finish-time fairness (Themis' rho) as a sequence of LPs: Gavel's ``finish_time_fairness``.

``rho_m(X) = (t_m + r_m / throughput(m, X)) / (t_m + r_m / iso_m)``: the job's expected
finish time under X over its finish time under an equal share of the cluster (``t_m``
time since arrival, ``r_m`` remaining steps). Gavel minimises ``max_m rho_m`` as one
cvxpy problem with an ``inv_pos`` per job, a conic program that is slow to build and
solve for many jobs. For a fixed rho the constraint ``rho_m <= rho`` is linear —
``throughput(m, X) >= d_m(rho) = r_m / (rho b_m - t_m)`` — so we solve the max-min LP
``max lambda s.t. throughput(m, X) >= lambda d_m(rho)`` and find the root of
``lambda(rho) = 1`` by Newton steps on the LP's dual (safeguarded by the bracket of
feasible rho, see :func:`solve_ftf`): a handful of warm-started LPs, each as fast as LAS.

Deviation, documented in docs/gavel.md: ``iso_m`` is the throughput under Gavel's
isolated equal split (a fixed matrix) rather than under a solution of the agnostic LAS
LP, whose optimal face is not unique. Like Gavel, priority weights are ignored.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from policies.base import PolicyBase, register
from policies.gavel.inputs import (
    FloatArray,
    Problem,
    build_problem,
    isolated_allocation,
    to_allocation,
)
from policies.gavel.lp import base_constraints, utility_matrix
from policies.gavel.warm import WarmMaxMin


def ftf_inputs(p: Problem, now: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(t, r, b): time since arrival, remaining steps, isolated finish time per job."""
    t = np.array([max(0.0, now - j.arrival_s) for j in p.jobs]).reshape(p.n)
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
    iso = (p.T * isolated_allocation(p.sf, p.capacity)).sum(axis=1)
    iso = np.where(iso > 0, iso, 1e-12)
    return t, r, t + r / iso


def rho_of(p: Problem, X: FloatArray, t: FloatArray, r: FloatArray, b: FloatArray) -> FloatArray:
    y = (p.T * X).sum(axis=1)
    with np.errstate(divide="ignore"):
        out: FloatArray = (t + r / np.maximum(y, 1e-300)) / b
    return out


def solve_ftf(p: Problem, now: float, tol: float = 1e-10) -> tuple[FloatArray, float]:
    """min_X max_m rho_m(X); returns (X, optimal max rho) over jobs that can run."""
    t, r, b = ftf_inputs(p, now)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    if not active.any():
        return np.zeros((p.n, p.k)), 0.0
    T = p.T * p.runnable
    A, bb = base_constraints(p.sf, p.capacity)
    ub = p.runnable.astype(np.float64).ravel()
    ymax = T.max(axis=1)
    lo = float(np.max(((t + r / np.where(ymax > 0, ymax, 1.0)) / b)[active]))

    best_x = np.zeros((p.n, p.k))
    best_rho = math.inf
    lp = WarmMaxMin(utility_matrix(T), A, bb, ub, demand=np.zeros(p.n))

    def demand(rho: float) -> FloatArray:
        out: FloatArray = np.where(active, r / np.maximum(rho * b - t, 1e-300), 0.0)
        return out

    def evaluate(rho: float) -> tuple[float, FloatArray]:
        """lambda(rho) and the job rows' duals; records the best allocation seen."""
        nonlocal best_x, best_rho
        lp.set_demand(demand(rho) / lp.scale)
        x, level, duals = lp.solve()
        X = x.reshape(p.n, p.k)
        achieved = float(np.max(rho_of(p, X, t, r, b)[active]))
        if achieved < best_rho:
            best_rho, best_x = achieved, X
        return level / lp.scale, np.maximum(duals, 0.0)

    # Newton on the dual: with the optimal dual y fixed, lambda(rho) = C / (y . d(rho)),
    # so the root of lambda = 1 solves the scalar equation y . d(rho') = lambda y . d(rho),
    # which is monotone in rho' (bisection in numpy). Re-solve there; a new dual means a
    # new piece of lambda(rho). Every LP solution is feasible, so best_rho only improves.
    rho = lo
    for _ in range(30):
        lam, y = evaluate(rho)
        if abs(lam - 1.0) <= tol or best_rho - lo <= tol * best_rho:
            break
        if lam < 1.0:
            lo = max(lo, rho)
        target = lam * float(y @ demand(rho))
        a_lo, a_hi = lo, best_rho
        for _ in range(100):
            mid = 0.5 * (a_lo + a_hi)
            if float(y @ demand(mid)) > target:
                a_lo = mid
            else:
                a_hi = mid
            if a_hi - a_lo <= 1e-15 * a_hi:
                break
        nxt = 0.5 * (a_lo + a_hi)
        rho = nxt if lo < nxt < best_rho else 0.5 * (lo + best_rho)
    return best_x, best_rho


@register
class FinishTimeFairnessPerf(PolicyBase):
    """Heterogeneity-aware finish-time fairness (Gavel: ``finish_time_fairness_perf``)."""

    name: ClassVar[str] = "finish_time_fairness_perf"
    agnostic: ClassVar[bool] = False

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=self.agnostic)
        if p.n == 0 or p.k == 0:
            return Allocation()
        X, _ = solve_ftf(p, snap.now)
        return to_allocation(p, X)


@register
class FinishTimeFairness(FinishTimeFairnessPerf):
    """Agnostic variant: every throughput is 1 (Gavel: ``finish_time_fairness``)."""

    name: ClassVar[str] = "finish_time_fairness"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
