"""Gavel's answers where they are not unique: ECOS's point of a set, as Gavel gets it.

Gavel solves every policy with cvxpy + ECOS, an interior-point method: where the optimal
X is not unique, it returns a point near the centre of the optimal face, and the round
mechanism realises whatever X comes back, so which optimum matters for the simulated
JCTs. Our LPs (HiGHS) end at vertices. :func:`ecos_point` hands ECOS an LP in Gavel's
form (``x >= 0`` as rows, no ``x <= 1``), and the policies use it to pick Gavel's point
once the optimum is known (finish-time fairness, max-sum throughput, water filling).

The makespan policy goes further, because Gavel's ``MinTotalDurationPolicyWithPerf``
does not solve for the optimal makespan at all. It bisects T between 100 s and 10^6 s
(widening tenfold if nothing is feasible) until the bracket is within 5 %, and at each
T asks ECOS for *any* X with ``x >= 0, sum_j x_mj <= 1, sum_m sf_m x_mj <= G_j,
sum_j T_mj x_mj >= r_m / T`` (objective: a constant). It keeps the X found at the
smallest feasible T: near the centre of that feasible set, an allocation that spreads
every job over the types where it has slack, nothing like the optimal vertex of the
makespan LP (:func:`lyra_ray.policies.gavel.min_total_duration.makespan_lp`).
:func:`gavel_makespan` makes the same calls in the same order. Only ECOS's exit flag 0
counts as feasible (cvxpy reports its "inaccurate" answers as not optimal, and Gavel
moves on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.ecos_las import _solve, _solve_kept
from lyra_ray.policies.gavel.inputs import FloatArray
from lyra_ray.policies.gavel.lazy_import import lazy_module

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


Rows = tuple["sp.csr_matrix", FloatArray]
"""Extra rows ``R x <= r`` over the same columns (teams' quotas: :mod:`.team_rows`)."""


def feasible_point(
    T: FloatArray,
    sf: FloatArray,
    capacity: FloatArray,
    need: FloatArray,
    extra: Rows | None = None,
) -> FloatArray | None:
    """ECOS's point in ``{x : base constraints, T x >= need, extra}``, or ``None``."""
    return ecos_point(np.zeros(T.size), T, sf, capacity, need, extra)


def ecos_point(
    cost: FloatArray,
    T: FloatArray,
    sf: FloatArray,
    capacity: FloatArray,
    need: FloatArray | None = None,
    extra: Rows | None = None,
) -> FloatArray | None:
    """ECOS's answer to ``min cost . x`` over Gavel's base constraints (``x >= 0`` as
    rows, no ``x <= 1``), plus ``T x >= need`` rows if given; ``None`` unless ECOS
    reports exit flag 0. With a constant objective this is a point near the centre of
    the feasible set; with an LP objective, near the centre of its optimal face — the
    allocation Gavel's cvxpy + ECOS returns for the same problem. ``extra`` rows (teams'
    quotas) are stacked below; that LP is set up afresh each time (no kept workspace)."""
    n, k = T.shape
    nx = n * k
    h = [np.zeros(nx), capacity, np.ones(n)]
    if need is not None:
        h.append(-need)
    nrow = nx + k + n + (n if need is not None else 0)
    c = np.asarray(cost, dtype=np.float64)
    if extra is not None and extra[0].shape[0]:
        G = sp.vstack([constraint_matrix(T, sf, need is not None), extra[0]], format="csc")
        G.sort_indices()
        sol = _solve(
            c,
            (G.data, G.indices.astype(np.int64), G.indptr.astype(np.int64)),
            nrow + extra[0].shape[0],
            np.concatenate([*h, extra[1]]),
        )
        if int(sol["info"]["exitFlag"]) != 0:
            return None
        x_extra = np.asarray(sol["x"], dtype=np.float64)
        out_extra: FloatArray = np.clip(x_extra.reshape(n, k), 0.0, 1.0)
        return out_extra
    csc = constraint_arrays(T, sf, need is not None)
    if (sf != 0).all():  # the pattern depends on the shape alone: kept per shape
        flag, x, _, _ = _solve_kept(
            ("centre", n, k, need is not None), c, csc, nrow, np.concatenate(h)
        )
    else:
        sol = _solve(c, csc, nrow, np.concatenate(h))
        flag, x = int(sol["info"]["exitFlag"]), np.asarray(sol["x"], dtype=np.float64)
    if flag != 0:
        return None
    out: FloatArray = np.clip(x.reshape(n, k), 0.0, 1.0)
    return out


def constraint_arrays(
    T: FloatArray, sf: FloatArray, with_need: bool
) -> tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]]:
    """:func:`ecos_point`'s ``G`` as CSC arrays, written column by column.

    Rows: ``-x <= 0`` (one per variable), GPUs per type, time per job, then (``with_need``)
    ``-T x <= -need`` per job; every column ``x_mj`` has one entry in each block, in that
    row order. The same arrays, bit for bit and with ``T``'s zeros kept, as stacking the
    blocks with scipy (:func:`constraint_matrix`, ``tests/unit/test_ecos_centre.py``),
    which costs several times ECOS's own solve on a replay's small LPs.
    """
    if not (sf != 0).all():  # scipy's kron would drop a zero: keep its matrix exactly
        G = constraint_matrix(T, sf, with_need)
        return G.data, G.indices.astype(np.int64), G.indptr.astype(np.int64)
    n, k = T.shape
    nx = n * k
    per = 4 if with_need else 3
    job = np.repeat(np.arange(n), k)
    idx = np.empty((nx, per), dtype=np.int64)
    val = np.empty((nx, per))
    idx[:, 0] = np.arange(nx)
    val[:, 0] = -1.0
    idx[:, 1] = nx + np.tile(np.arange(k), n)
    val[:, 1] = sf[job]
    idx[:, 2] = nx + k + job
    val[:, 2] = 1.0
    if with_need:
        idx[:, 3] = nx + k + n + job
        val[:, 3] = -T.ravel()
    return val.ravel(), idx.ravel(), np.arange(0, per * nx + 1, per, dtype=np.int64)


def constraint_matrix(T: FloatArray, sf: FloatArray, with_need: bool) -> sp.csc_matrix:
    """:func:`constraint_arrays`' matrix stacked from blocks with scipy (the reference)."""
    n, k = T.shape
    nx = n * k
    blocks = [
        -sp.identity(nx, format="csc"),
        sp.kron(sf.reshape(1, n), sp.identity(k), format="csc"),  # GPUs per type
        sp.kron(sp.identity(n), np.ones((1, k)), format="csc"),  # time per job
    ]
    if with_need:
        rows = (np.repeat(np.arange(n), k), np.arange(nx))
        blocks.append(-sp.csc_matrix((T.ravel(), rows), shape=(n, nx)))
    G = sp.vstack(blocks, format="csc")
    G.sort_indices()
    return G


def gavel_makespan(
    T: FloatArray,
    sf: FloatArray,
    capacity: FloatArray,
    remaining: FloatArray,
    extra: Rows | None = None,
) -> FloatArray:
    """X as Gavel's bisection leaves it (see the module doc); ``T`` rows must be > 0
    somewhere. ``extra``: rows every step's feasibility LP also keeps (teams' quotas)."""
    max_t, min_t, last_max = 1e6, 100.0, 1e6
    best: FloatArray | None = None
    while best is None:
        while 1.05 * min_t < max_t:
            t = (min_t + max_t) / 2.0
            x = feasible_point(T, sf, capacity, remaining / t, extra)
            if x is not None:
                best, max_t = x, t
            else:
                min_t = t
        max_t, min_t = last_max * 10.0, last_max
        last_max *= 10.0
        if last_max > 1e15:  # no T works (a job that runs nowhere): nothing to allocate
            return np.zeros_like(T)
    return best
