"""Plain cvxpy formulations of each Gavel policy: the references the HiGHS LPs are tested
against (objective values, 1e-6) and benchmarked beside. Written the way Gavel writes
them — dense cvxpy expressions, one problem per policy — not for speed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cvxpy as _cvxpy
import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.inputs import FloatArray, Problem

cp: Any = _cvxpy  # cvxpy ships no type stubs
SOLVER = "CLARABEL"
TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 500}


def _base(p: Problem, x: Any) -> list[Any]:
    return [
        x >= 0,
        x <= p.runnable.astype(np.float64),
        cp.sum(x, axis=1) <= 1,
        p.sf @ x <= p.capacity,
    ]


def _solve(prob: Any, conic: bool = False) -> float:
    """LPs go to cvxpy's own HiGHS interface (a vertex: exact); finish-time fairness
    needs a conic solver (CLARABEL, tight tolerances, retried with its defaults)."""
    if not conic:
        prob.solve(solver="HIGHS")
    else:
        try:
            prob.solve(solver=SOLVER, **TIGHT)
        except cp.error.SolverError:
            prob.solve(solver=SOLVER)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"cvxpy: {prob.status}")
    return float(prob.value)


def las_level(p: Problem, coef: FloatArray) -> float:
    x = cp.Variable((p.n, p.k))
    act = p.runnable.any(axis=1)
    scale = float(np.abs(coef).max()) or 1.0
    util = cp.sum(cp.multiply(coef[act] / scale, x[act]), axis=1)
    return _solve(cp.Problem(cp.Maximize(cp.min(util)), _base(p, x))) * scale


def ftf_rho(p: Problem, now: float) -> float:
    t = np.array([max(0.0, now - j.arrival_s) for j in p.jobs])
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs])
    # Gavel's IsolatedPolicy: each row of the equal split divided by its own sum if > 1.
    iso_x = np.tile(p.capacity / max(p.n, 1), (p.n, 1)) / p.sf[:, None]
    iso_x = iso_x / np.maximum(iso_x.sum(axis=1), 1.0)[:, None]
    iso = (p.T * iso_x).sum(axis=1)
    b = t + r / np.where(iso > 0, iso, 1e-12)
    x = cp.Variable((p.n, p.k))
    act = np.flatnonzero(p.runnable.any(axis=1))
    y = cp.sum(cp.multiply(p.T[act] * p.runnable[act], x[act]), axis=1)
    rho = cp.multiply(t[act] + cp.multiply(r[act], cp.inv_pos(y)), 1.0 / b[act])
    return _solve(cp.Problem(cp.Minimize(cp.max(rho)), _base(p, x)), conic=True)


def makespan(p: Problem) -> float:
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs])
    theta = las_level(p, (p.T * p.runnable) / r[:, None])
    return 1.0 / theta


def sum_throughput(
    p: Problem, cost: FloatArray | None = None, floors: Mapping[int, float] | None = None
) -> float:
    per_type = np.ones(p.k) if cost is None else cost
    x = cp.Variable((p.n, p.k))
    T = p.T * p.runnable
    cons = _base(p, x)
    if floors:
        rows = sorted(floors)
        cons.append(
            cp.sum(cp.multiply(T[rows], x[rows]), axis=1) >= np.array([floors[i] for i in rows])
        )
    return _solve(cp.Problem(cp.Maximize(cp.sum(cp.multiply(T / per_type, x))), cons))


def water_filling(p: Problem, coef: FloatArray, tol: float = 1e-7) -> FloatArray:
    """Max-min fair utility vector by textbook water-filling: raise the level, freeze every
    job that cannot go above it (tested one LP per job), repeat."""
    act: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    frozen: NDArray[np.bool_] = ~act
    level = np.zeros(p.n)
    while not frozen.all():
        x = cp.Variable((p.n, p.k))
        util = cp.sum(cp.multiply(coef, x), axis=1)
        t = cp.Variable()
        free = np.flatnonzero(~frozen)
        fz = np.flatnonzero(frozen & act)
        cons = [*_base(p, x), util[free] >= t]
        if fz.size:
            cons.append(util[fz] >= level[fz] * (1 - 1e-6))
        t_star = _solve(cp.Problem(cp.Maximize(t), cons))
        newly, best = [], {}
        for m in free:
            cons_m = [*_base(p, x), util[free] >= t_star * (1 - 1e-6)]
            if fz.size:
                cons_m.append(util[fz] >= level[fz] * (1 - 1e-6))
            best[m] = _solve(cp.Problem(cp.Maximize(util[m]), cons_m))
            if best[m] <= t_star * (1 + tol) + 1e-12:
                newly.append(m)
        if not newly:
            # The 1e-6 slack given to the others lets a bottleneck job rise a little
            # past ``tol`` (seen: 1.1e-5 relative), and then no job looked frozen. Freeze
            # the ones that rise only that little, not everyone: freezing everyone held a
            # job that could reach 4.5x the level at the level (a hypothesis example).
            newly = [m for m in free if best[m] <= t_star * (1 + 1e-3)] or list(free)
        level[newly] = t_star
        frozen[newly] = True
    return level


def packed_las_level(
    p: Problem,
    pair_idx: NDArray[np.int64],
    pair_thr: FloatArray,
    pair_gpus: FloatArray,
    per_job: FloatArray,
) -> float:
    """Packed LAS over the given pairs (Gavel's formulation, on the pruned pair set)."""
    P = pair_idx.shape[0]
    x = cp.Variable((p.n, p.k))
    xp = cp.Variable((P, p.k))
    T = p.T * p.runnable
    util = cp.sum(cp.multiply(T * per_job[:, None], x), axis=1)
    ok = ((pair_thr > 0).all(axis=2)).astype(np.float64)
    for side in (0, 1):
        m = pair_idx[:, side]
        gain = pair_thr[:, :, side] * per_job[m][:, None]
        member = np.zeros((p.n, P))
        member[m, np.arange(P)] = 1.0
        util = util + member @ cp.sum(cp.multiply(gain, xp), axis=1)
    time_used = cp.sum(x, axis=1)
    for side in (0, 1):
        member = np.zeros((p.n, P))
        member[pair_idx[:, side], np.arange(P)] = 1.0
        time_used = time_used + member @ cp.sum(xp, axis=1)
    cons = [
        x >= 0,
        x <= p.runnable.astype(np.float64),
        xp >= 0,
        xp <= ok,
        time_used <= 1,
        p.sf @ x + pair_gpus @ xp <= p.capacity,
    ]
    act = np.flatnonzero(p.runnable.any(axis=1))
    scale = float(np.abs(T * per_job[:, None]).max()) or 1.0
    return _solve(cp.Problem(cp.Maximize(cp.min(util[act]) / scale), cons)) * scale
