"""Finish-time fairness (Themis' rho) as a sequence of LPs: Gavel's ``finish_time_fairness``.

``rho_m(X) = (t_m + r_m / throughput(m, X)) / (c_m + r_m / iso_m)``: the job's expected
finish time under X (``t_m`` time since arrival, ``r_m`` remaining steps) over its
expected finish time had it always run on an equal share of the cluster, exactly as
Gavel's ``FinishTimeFairnessPolicyWithPerf`` writes it: ``c_m`` is the *isolated time*
of the work already done — at each recomputation the steps made since the previous one
divided by the isolated throughput of that one, summed — and ``iso_m`` is the
throughput under Gavel's isolated split (``X_mj = G_j / (n sf_m)``, each row divided by
its own sum when that exceeds 1). That sum is the policy's state, kept across calls
(``to_state``). The agnostic variant, as in Gavel, gives a job its throughput on the
reference type (``v100``, else its fastest) on every type, not 1.0.

Gavel minimises ``max_m rho_m`` as one cvxpy problem with an ``inv_pos`` per job, a
conic program that is slow to build and solve for many jobs. For a fixed rho the
constraint ``rho_m <= rho`` is linear — ``throughput(m, X) >= d_m(rho) = r_m / (rho b_m
- t_m)`` — so we solve the max-min LP ``max lambda s.t. throughput(m, X) >= lambda
d_m(rho)`` and find the root of ``lambda(rho) = 1`` by Newton steps on the LP's dual
(safeguarded by the bracket of feasible rho, see :func:`solve_ftf`): a handful of
warm-started LPs, each as fast as LAS. Like Gavel, priority weights are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.ecos_centre import feasible_point
from lyra_ray.policies.gavel.inputs import (
    FloatArray,
    Problem,
    build_problem,
    to_allocation,
)
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import base_constraints, utility_matrix
from lyra_ray.policies.gavel.team_rows import rows_of_jobs, with_rows
from lyra_ray.policies.gavel.warm import WarmMaxMin

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


def isolated_throughput(p: Problem) -> FloatArray:
    """Throughput under Gavel's isolated split (``IsolatedPolicy.get_throughputs``)."""
    x = np.tile(p.capacity / max(p.n, 1), (p.n, 1)) / p.sf[:, None]
    x = x / np.maximum(x.sum(axis=1), 1.0)[:, None]
    iso = (p.T * x).sum(axis=1)
    out: FloatArray = np.where(iso > 0, iso, 1e-12)
    return out


def ftf_inputs(
    p: Problem, now: float, done_isolated: FloatArray | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(t, r, b): time since arrival, remaining steps, isolated finish time per job.

    ``done_isolated`` is ``c_m`` (see the module doc); without it, ``t_m`` stands in.
    """
    t = np.array([max(0.0, now - j.arrival_s) for j in p.jobs]).reshape(p.n)
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
    c = t if done_isolated is None else done_isolated
    return t, r, c + r / isolated_throughput(p)


def rho_of(p: Problem, X: FloatArray, t: FloatArray, r: FloatArray, b: FloatArray) -> FloatArray:
    y = (p.T * X).sum(axis=1)
    with np.errstate(divide="ignore"):
        out: FloatArray = (t + r / np.maximum(y, 1e-300)) / b
    return out


def solve_ftf(
    p: Problem, now: float, tol: float = 1e-10, done_isolated: FloatArray | None = None
) -> tuple[FloatArray, float]:
    """min_X max_m rho_m(X); returns (X, optimal max rho) over jobs that can run."""
    t, r, b = ftf_inputs(p, now, done_isolated)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    if not active.any():
        return np.zeros((p.n, p.k)), 0.0
    A, bb = with_rows(*base_constraints(p.sf, p.capacity), p)
    coef = p.T * p.runnable
    U = utility_matrix(coef)
    ub = p.runnable.astype(np.float64).ravel()
    # Row m of U is coef's row m: its best variable is the row's max (scipy's sparse max
    # also counts U's implicit zeros, which only matters where no entry is positive).
    x, rho = solve_rho(U, A, bb, ub, active, t, r, b, tol, ymax=coef.max(axis=1))
    return x.reshape(p.n, p.k), rho


def solve_rho(
    U: sp.csr_matrix,
    A: sp.csr_matrix,
    bb: FloatArray,
    ub: FloatArray,
    active: NDArray[np.bool_],
    t: FloatArray,
    r: FloatArray,
    b: FloatArray,
    tol: float = 1e-10,
    ymax: FloatArray | None = None,
) -> tuple[FloatArray, float]:
    """min over x of max_m rho_m, where job m's throughput is ``(U x)_m``: singles only
    (:func:`solve_ftf`) or singles and pairs (``finish_time_fairness_packed``).

    ``ymax``: each row's best throughput of one variable where the caller has it without
    scipy's sparse max (only its positive entries are read)."""
    if ymax is None:  # best throughput of one variable
        ymax = np.asarray(U.max(axis=1).todense()).ravel()
    lo = float(np.max(((t + r / np.where(ymax > 0, ymax, 1.0)) / b)[active]))
    best_x = np.zeros(U.shape[1])
    best_rho = math.inf
    lp = WarmMaxMin(U, A, bb, ub, demand=np.zeros(U.shape[0]))

    def demand(rho: float) -> FloatArray:
        out: FloatArray = np.where(active, r / np.maximum(rho * b - t, 1e-300), 0.0)
        return out

    def evaluate(rho: float) -> tuple[float, FloatArray]:
        """lambda(rho) and the job rows' duals; records the best allocation seen."""
        nonlocal best_x, best_rho
        lp.set_demand(demand(rho) / lp.scale)
        x, level, duals = lp.solve()
        y = U @ x
        with np.errstate(divide="ignore"):
            rhos = (t + r / np.maximum(y, 1e-300)) / b
        achieved = float(np.max(rhos[active]))
        if achieved < best_rho:
            best_rho, best_x = achieved, x
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


def centre_of_optimum(
    p: Problem, now: float, done: FloatArray, rho: float, X: FloatArray, slack: float = 1e-6
) -> FloatArray:
    """The point of the optimal face Gavel's solver returns, rather than a vertex of it.

    Gavel solves ``min max_m rho_m`` with ECOS, an interior-point method, which stops
    near the analytic centre of the set of optimal X; our LPs end at a vertex. Where
    that set is large — always for the agnostic variant, whose jobs run equally fast on
    every type — the rounds realise very different allocations from the two (14 % apart
    in average JCT on max_min_fairness.trace, 8:16:24). So once rho* is known, ECOS is
    asked for a point of ``{X : base constraints, rho_m(X) <= rho* (1 + slack)}`` with
    no objective: near that set's centre, as Gavel's answer is. ``X`` is kept if ECOS
    fails.
    """
    t, r, b = ftf_inputs(p, now, done)
    act = np.asarray(p.runnable.any(axis=1))
    need = r / np.maximum(rho * (1.0 + slack) * b - t, 1e-300)
    centre = feasible_point(
        (p.T * p.runnable)[act], p.sf[act], p.capacity, need[act], rows_of_jobs(p, act)
    )
    if centre is None:
        return X
    out = np.zeros_like(X)
    out[act] = centre * p.runnable[act]
    return out


@register
class FinishTimeFairnessPerf(PolicyBase):
    """Heterogeneity-aware finish-time fairness (Gavel: ``finish_time_fairness_perf``)."""

    name: ClassVar[str] = "finish_time_fairness_perf"
    agnostic: ClassVar[bool] = False
    reference_type: ClassVar[GpuType] = "v100"

    def __init__(self) -> None:
        self._done: dict[JobId, list[float]] = {}
        """Per job: [isolated time of the work done, remaining steps and isolated
        throughput at the previous call] (Gavel's ``_cumulative_isolated_time`` and its
        two ``_prev_iteration`` dicts)."""

    def to_state(self) -> dict[str, Any]:
        return {"done": {j: list(v) for j, v in sorted(self._done.items())}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._done = {str(j): [float(x) for x in v] for j, v in state.get("done", {}).items()}

    def problem(self, snap: ClusterSnapshot) -> Problem:
        p = build_problem(snap)
        if not self.agnostic or p.n == 0 or p.k == 0:  # k = 0: no GPU yet (all queued)
            return p
        # Gavel's agnostic variant: every type offers the reference type's throughput.
        if self.reference_type in p.gpu_types:
            ref = p.T[:, p.gpu_types.index(self.reference_type)]
        else:
            ref = p.T.max(axis=1)
        return replace(p, T=np.repeat(ref[:, None], p.k, axis=1))

    def done_isolated(self, p: Problem) -> FloatArray:
        """``c_m``, advanced by the steps made since the previous call (then remembered)."""
        iso = isolated_throughput(p)
        c = np.zeros(p.n)
        done: dict[JobId, list[float]] = {}
        for i, job in enumerate(p.jobs):
            prev = self._done.get(job.id)
            r = max(job.remaining_steps, 1e-9)
            if prev is not None:
                c[i] = prev[0] + (prev[1] - r) / prev[2]
            done[job.id] = [float(c[i]), r, float(iso[i])]
        self._done = done
        return c

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = self.problem(snap)
        if p.n == 0 or p.k == 0:
            self._done = {}
            return Allocation()
        alloc = self._solve(snap, p, self.done_isolated(p))
        if not self.agnostic:
            return alloc
        # The reference throughput lets X sit where the job cannot run; the rounds never
        # use such entries (Gavel's skip them too), so they are dropped.
        real = build_problem(snap).runnable
        row_of = {job.id: i for i, job in enumerate(p.jobs)}
        fractions = {
            key: (
                {g: (x if real[row_of[key], j] else 0.0) for j, (g, x) in enumerate(xs.items())}
                if key in row_of
                else dict(xs)
            )
            for key, xs in alloc.fractions.items()
        }
        return Allocation(fractions=fractions)

    def _solve(self, snap: ClusterSnapshot, p: Problem, done: FloatArray) -> Allocation:
        X, rho = solve_ftf(p, snap.now, done_isolated=done)
        if math.isfinite(rho) and rho > 0:
            X = centre_of_optimum(p, snap.now, done, rho, X)
        return to_allocation(p, X)


@register
class FinishTimeFairness(FinishTimeFairnessPerf):
    """Agnostic variant (Gavel: ``finish_time_fairness``): the reference type's throughput
    on every type."""

    name: ClassVar[str] = "finish_time_fairness"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
