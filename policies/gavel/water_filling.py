"""Hierarchical max-min fairness by water-filling: ``max_min_fairness_water_filling[_perf]``.

Two levels: entities (``JobSpec.user``) share the cluster equally; inside an entity,
jobs share the entity's part in proportion to their priority weights. So job m's
weight is ``w_m / sum_{m' in e} w_m'`` and its utility is LAS's normalised throughput
divided by that weight. Unlike plain LAS (one LP, leftovers unassigned), water-filling
is Pareto-efficient: raise the common level with an LP, freeze the jobs that cannot go
higher, repeat with the rest. Gavel finds the frozen jobs with a MILP per iteration; a
job whose ``utility >= level`` row has a positive dual is at that level in *every*
optimal solution, hence a bottleneck, so the duals of the same LP identify them and
each iteration is one warm-started LP (:mod:`lyra_ray.policies.gavel.highs_incremental`, where
a freeze is a bound change). Every iteration freezes at least one job (duals sum to 1).

Most levels, though, are single jobs reaching their own cap (all their time on their
best type), which would cost one LP per job. Those are found in bulk — the largest
prefix of rising jobs by cap that can sit at their caps while the rest share a level at
least as high — by galloping search over warm LPs: a number of LPs logarithmic in the
job count instead of one per job.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.ecos_centre import feasible_point
from lyra_ray.policies.gavel.highs_incremental import LevelLP, LevelSolution
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import base_constraints, utility_matrix
from lyra_ray.policies.gavel.max_min_fairness import las_coefficients
from lyra_ray.policies.gavel.team_rows import rows_of_jobs, with_rows

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

log = logging.getLogger(__name__)


def hierarchical_weights(p: Problem, entities: Mapping[str, float] | None = None) -> FloatArray:
    """Job weight inside a two-level (entity, job) hierarchy: the entity's weight (1
    unless ``entities`` names it: teams, :mod:`lyra_ray.policies.teams`) times the job's
    share of its entity's priority weights. The entity is the job's owner, or its team
    under the teams wrapper (:meth:`Problem.entity`)."""
    totals: dict[str, float] = defaultdict(float)
    of = [p.entity(i) for i in range(p.n)]
    for i, e in enumerate(of):
        totals[e] += float(p.weights[i])
    ew = entities or {}
    return np.array([ew.get(e, 1.0) * p.weights[i] / totals[e] for i, e in enumerate(of)]).reshape(
        p.n
    )


def water_fill(
    U: sp.csr_matrix,
    A: sp.csr_matrix,
    b: FloatArray,
    ub: FloatArray,
    active: NDArray[np.bool_],
    caps: FloatArray | None = None,
    dual_tol: float = 1e-9,
    rel_tol: float = 1e-7,
) -> tuple[FloatArray, FloatArray]:
    """Max-min fair utilities of ``U x`` under ``A x <= b``; returns (x, level per job).

    ``caps``: an upper bound on each job's utility over the feasible set, by default
    :func:`utility_caps`. Exact ones let one step freeze hundreds of jobs; any valid
    bound (even ``inf``) gives the same result, only slower.
    """
    n = U.shape[0]
    lp = LevelLP(U, A, b, ub)
    caps = utility_caps(U, A, b, ub) if caps is None else np.asarray(caps, dtype=np.float64)
    cap = caps / lp.scale
    frozen: NDArray[np.bool_] = ~active
    level = np.zeros(n)  # scaled units until the end
    lp.set_jobs(~frozen, np.zeros(n))
    x = np.zeros(U.shape[1])
    while not frozen.all():
        res = lp.solve()
        if res is None:
            # Numerical trouble after many warm re-solves (floors a hair too high): keep
            # the last feasible allocation and freeze the rest where it leaves them.
            log.warning("water-filling stopped early with %d jobs unfrozen", int((~frozen).sum()))
            util = np.asarray(U @ x).ravel() / lp.scale
            level[~frozen] = util[~frozen]
            break
        rising = ~frozen
        capped, res = _cap_limited(lp, res, rising, cap, rel_tol)
        x = res.x
        if capped.size:
            level[capped] = cap[capped]
            frozen[capped] = True
            rising = ~frozen
        newly = rising & ((res.duals > dual_tol) | (cap <= res.t * (1 + rel_tol)))
        if rising.any() and not newly.any():
            newly = rising
        level[newly] = res.t
        frozen |= newly
        lp.set_jobs(~frozen, np.where(frozen & active, level * (1 - rel_tol), 0.0))
    return x, level * lp.scale


def utility_caps(U: sp.csr_matrix, A: sp.csr_matrix, b: FloatArray, ub: FloatArray) -> FloatArray:
    """An upper bound on each job's utility ``U_m x``, from one row of ``A x <= b``:
    if a row with no negative entry has ``A_rc > 0`` on every column c job m draws
    utility from, ``U_m x <= b_r max_c U_mc / A_rc`` (else ``U_m x <= U_m ub``).
    Gavel's time row ``sum_j X_mj (+ pairs) <= 1`` gives ``max_c U_mc``, the job
    running all its time on its best type or pair, which is exact. ``inf`` where U
    has a negative entry."""
    Uc = (U.tocsr() @ sp.diags((np.asarray(ub) > 0).astype(np.float64))).tocsr()
    Uc.eliminate_zeros()
    size = Uc.getnnz(axis=1)
    if (Uc.data < 0).any():
        return np.where(size == 0, 0.0, np.inf)
    caps = np.asarray(Uc @ np.asarray(ub, dtype=np.float64)).ravel()  # every x at its bound
    Ac = A.tocsr()
    neg = np.zeros(Ac.shape[0], dtype=bool)
    neg[np.repeat(np.arange(Ac.shape[0]), np.diff(Ac.indptr))[Ac.data < 0]] = True
    usable = sp.diags((~neg & (np.asarray(b) >= 0)).astype(np.float64))
    pattern = (usable @ (Ac > 0).astype(np.float64)).T.tocsc()
    hits = ((Uc > 0).astype(np.float64) @ pattern).tocoo()
    ok = (hits.data == size[hits.row]) & (size[hits.row] > 0)
    m_arr, r_arr = hits.row[ok], hits.col[ok]
    if m_arr.size == 0:
        return caps
    counts = size[m_arr]
    first = np.cumsum(counts) - counts
    entry = (
        np.arange(int(counts.sum()))
        - np.repeat(first, counts)
        + np.repeat(Uc.indptr[m_arr], counts)
    )
    a_rc = np.asarray(Ac[np.repeat(r_arr, counts), Uc.indices[entry]]).ravel()
    per_row = np.maximum.reduceat(Uc.data[entry] / a_rc, first) * np.asarray(b)[r_arr]
    np.minimum.at(caps, m_arr, per_row)
    return caps


def _cap_limited(
    lp: LevelLP,
    res: LevelSolution,
    rising: NDArray[np.bool_],
    cap: FloatArray,
    rel_tol: float,
) -> tuple[NDArray[np.int64], LevelSolution]:
    """Jobs that reach their own cap before the level stops rising, and the LP then.

    Holding the first k rising jobs (by cap) at their caps and the rest at a common
    level is feasible for every k up to some k* and for none above (each job's
    requirement ``min(level, cap_m)`` only grows with k), so k* is found by galloping
    then bisection, a logarithmic number of warm LPs instead of one per job. A feasible probe at
    level t proves every k whose caps are all <= t; one whose level stays below the
    next cap is k* itself: the next job cannot reach its cap.
    """
    idx = np.flatnonzero(rising)
    order = idx[np.argsort(cap[idx], kind="stable")]
    c = cap[order]
    lo = int(np.searchsorted(c, res.t * (1 + rel_tol), side="right"))
    none = np.zeros(0, dtype=np.int64)
    if lo == 0 or lo >= order.size:
        return none, res  # (in ``res`` the capped jobs still hold the level down)
    base_rising, base_floor = lp.rising.copy(), lp.floor.copy()

    def state(k: int) -> tuple[NDArray[np.bool_], FloatArray]:
        r, f = base_rising.copy(), base_floor.copy()
        r[order[:k]] = False
        f[order[:k]] = c[:k] * (1 - rel_tol)
        return r, f

    def probe(k: int) -> LevelSolution | None:
        lp.set_jobs(*state(k))
        return lp.solve()

    best: LevelSolution | None = None
    best_k, hi, step = -1, order.size + 1, max(1, lo)
    while hi - lo > 1:
        k = min(lo + step, order.size) if hi > order.size else (lo + hi) // 2
        step *= 2
        out = probe(k)
        if out is None:
            hi = k
            continue
        # Any feasible probe lifts every job to min(t, its cap): ok up to ``reach``.
        reach = int(np.searchsorted(c, out.t * (1 + rel_tol), side="right"))
        if reach < k:
            hi, lo = k, max(lo, reach)
            continue
        lo, best, best_k = max(lo, reach), out, k
        if reach == k:
            break  # the level stops below the next job's cap: k is k*
    if best_k != lo:
        best = probe(lo)
    if best is None:  # numerical trouble: give up the shortcut
        lp.set_jobs(base_rising, base_floor)
        return none, res
    lp.set_jobs(*state(lo))
    return order[:lo], best


def solve_water_filling(
    p: Problem, agnostic: bool, entities: Mapping[str, float] | None = None
) -> tuple[FloatArray, FloatArray]:
    coef = las_coefficients(p, agnostic) * (p.weights / hierarchical_weights(p, entities))[:, None]
    A, b = with_rows(*base_constraints(p.sf, p.capacity), p)
    ub = p.runnable.astype(np.float64).ravel()
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    x, level = water_fill(utility_matrix(coef), A, b, ub, active)
    return x.reshape(p.n, p.k), level


def centre_of_levels(
    p: Problem,
    agnostic: bool,
    X: FloatArray,
    level: FloatArray,
    slack: float = 1e-6,
    entities: Mapping[str, float] | None = None,
) -> FloatArray:
    """Among the allocations that give every job its water level, the one near the centre.

    The levels are unique, the allocation is not; Gavel's last step is an ECOS solve,
    which stops near the centre of what is left, while ours ends at a simplex vertex, and
    the rounds realise different schedules from the two (5 % apart in average JCT on
    max_min_fairness.trace, 8:16:24, agnostic). ECOS is asked for a point of
    ``{X : base constraints, utility_m(X) >= level_m (1 - slack)}``; ``X`` if it fails.
    """
    coef = las_coefficients(p, agnostic) * (p.weights / hierarchical_weights(p, entities))[:, None]
    act = np.asarray(p.runnable.any(axis=1))
    centre = feasible_point(
        (coef * p.runnable)[act],
        p.sf[act],
        p.capacity,
        level[act] * (1.0 - slack),
        rows_of_jobs(p, act),
    )
    if centre is None:
        return X
    out = np.zeros_like(X)
    out[act] = centre * p.runnable[act]
    return out


@register
class MaxMinFairnessWaterFillingPerf(PolicyBase):
    """Hierarchical, heterogeneity-aware, Pareto-efficient max-min fairness."""

    name: ClassVar[str] = "max_min_fairness_water_filling_perf"
    agnostic: ClassVar[bool] = False

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=self.agnostic)
        if p.n == 0 or p.k == 0:
            return Allocation()
        ew = snap.entity_weights
        X, level = solve_water_filling(p, self.agnostic, ew)
        return to_allocation(p, centre_of_levels(p, self.agnostic, X, level, entities=ew))


@register
class MaxMinFairnessWaterFilling(MaxMinFairnessWaterFillingPerf):
    name: ClassVar[str] = "max_min_fairness_water_filling"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
