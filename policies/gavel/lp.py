"""Gavel's LPs as sparse matrices, solved by HiGHS.

Gavel builds every policy in cvxpy and pays for it in canonicalisation, which grows with
the job count and dominates the solve on large clusters. The problems are small LPs, so
here they are written directly as ``scipy.sparse`` matrices and handed to HiGHS through
``highspy``.

Variable layout: one column per (entity, GPU type), row-major — entity ``e`` on type ``j``
is column ``e * k + j``, where entities are the single jobs followed by the job pairs of
space-sharing policies — then any extra scalar columns (the max-min level ``t``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.lazy_import import lazy_module

if TYPE_CHECKING:
    import highspy
    import scipy.sparse as sp
else:  # imported at first use: see lazy_import
    highspy = lazy_module("highspy")
    sp = lazy_module("scipy.sparse")

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
_Index = NDArray[np.int32] | NDArray[np.int64]


class SolverError(RuntimeError):
    """HiGHS did not return an optimal solution (a bug in the formulation, not user input)."""


def base_constraints(
    sf: FloatArray,
    capacity: FloatArray,
    pairs: IntArray | None = None,
    pair_gpus: FloatArray | None = None,
    n_extra: int = 0,
) -> tuple[sp.csr_matrix, FloatArray]:
    """Gavel's base constraints as ``A x <= b``.

    * time: ``sum_j X_mj + sum_{pairs p containing m} sum_j X_pj <= 1`` per job m;
    * capacity: ``sum_m sf_m X_mj + sum_p gpus_p X_pj <= num_gpus_j`` per GPU type j.
    Non-negativity and ``X <= 1`` are column bounds, set by the caller.
    """
    n, k = sf.shape[0], capacity.shape[0]
    P = 0 if pairs is None else pairs.shape[0]
    nvars = (n + P) * k + n_extra
    if not P:
        return _single_constraints(sf, capacity, n_extra), np.concatenate([np.ones(n), capacity])
    jk = np.arange(n * k)
    rows = [jk // k]
    cols = [jk]
    vals = [np.ones(n * k)]
    rows.append(n + (jk % k))
    cols.append(jk)
    vals.append(np.repeat(sf, k))
    if P:
        assert pairs is not None and pair_gpus is not None
        pk = np.arange(P * k)
        pcol = n * k + pk
        for side in (0, 1):
            rows.append(np.repeat(pairs[:, side], k))
            cols.append(pcol)
            vals.append(np.ones(P * k))
        rows.append(n + (pk % k))
        cols.append(pcol)
        vals.append(np.repeat(pair_gpus, k))
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n + k, nvars),
    )
    b = np.concatenate([np.ones(n), capacity])
    return A, b


def _single_constraints(sf: FloatArray, capacity: FloatArray, n_extra: int) -> sp.csr_matrix:
    """:func:`base_constraints`' matrix without pairs as CSR arrays, bit for bit those of
    scipy's COO-to-CSR conversion (``tests/unit/test_lp_arrays.py``) at a fraction of
    its cost, which finish-time fairness pays at every solve of a replay."""
    n, k = sf.shape[0], capacity.shape[0]
    nk = n * k
    indptr = np.concatenate([np.arange(0, nk + 1, k), nk + n * np.arange(1, k + 1)])
    by_type = np.arange(n)[None, :] * k + np.arange(k)[:, None]  # row j: m k + j for every m
    indices = np.concatenate([np.arange(nk), by_type.ravel()])
    data = np.concatenate([np.ones(nk), np.tile(sf.astype(np.float64), k)])
    return sp.csr_matrix((data, indices, indptr), shape=(n + k, nk + n_extra))


def solve_min(
    c: FloatArray,
    A_ub: sp.spmatrix,
    b_ub: FloatArray,
    ub: FloatArray,
    lb: FloatArray | None = None,
    method: str = "ipm",
) -> tuple[FloatArray, FloatArray]:
    """Minimise ``c x`` s.t. ``A_ub x <= b_ub``, ``lb <= x <= ub``; returns (x, row duals).

    ``"ipm"`` (default): HiGHS's interior point + crossover, faster than dual simplex on
    large job sets and exact (a vertex). ``"ipm-interior"``: no crossover — like Gavel's
    ECOS it stops in the middle of the optimal face instead of at an arbitrary vertex
    (so a job is spread over equally good GPU types as Gavel's is), accurate to ~1e-8
    relative on well-scaled rows. ``"simplex"``: dual simplex.
    """
    A = sp.csc_matrix(A_ub)
    nrow, ncol = A.shape
    return _solve_csc(c, (A.indptr, A.indices, A.data), nrow, ncol, b_ub, ub, lb, method)


def _csc_arrays(
    rows: IntArray, cols: IntArray, vals: FloatArray, ncol: int
) -> tuple[IntArray, IntArray, FloatArray] | None:
    """CSC arrays of a COO matrix, exactly as ``sp.csc_matrix(sp.csr_matrix((vals, (rows,
    cols))))`` stores them (by column, then row; explicit zeros kept), at a fraction of
    scipy's per-call overhead — a simulation solves thousands of small LPs. ``None``
    when an entry repeats (scipy would sum them; the caller goes through scipy then).
    """
    order = np.lexsort((rows, cols))
    r, c = rows[order], cols[order]
    if r.size > 1 and bool(np.any((r[1:] == r[:-1]) & (c[1:] == c[:-1]))):
        return None
    indptr = np.zeros(ncol + 1, dtype=np.int64)
    np.cumsum(np.bincount(c, minlength=ncol), out=indptr[1:])
    return indptr, r, vals[order]


_LOCAL = threading.local()
_BANNER_LOCK = threading.Lock()
_banner_done = False


def new_highs() -> Any:
    """A silent HiGHS instance (typed ``Any``: highspy ships no stubs for its methods).

    WHY the first one is built with the process's stdout pointed at /dev/null: highspy
    1.16 prints its two-line banner ("Running HiGHS ... Copyright") when a process's
    first instance is constructed, before any option can be set, so it landed on top of
    every ``lyra simulate`` table and in the scheduler's log.
    """
    global _banner_done
    with _BANNER_LOCK:
        if _banner_done:
            h: Any = highspy.Highs()  # type: ignore[no-untyped-call]
        else:
            h = _first_highs()
            _banner_done = True
    h.setOptionValue("output_flag", False)
    return h


def _first_highs() -> Any:
    try:
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):  # no fd 1 (or a closed stdout)
        return highspy.Highs()  # type: ignore[no-untyped-call]
    try:
        os.dup2(null, 1)
        h = highspy.Highs()  # type: ignore[no-untyped-call]
        ctypes.CDLL(None).fflush(None)  # the banner may sit in C's stdio buffer
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    return h


def _highs() -> Any:
    """This thread's HiGHS instance, emptied and back at default options.

    Creating, filling a ``HighsLp`` for, and destroying a ``Highs`` object per solve is a
    noticeable share of a small LP's solve, and a simulation solves thousands. A cleared
    instance solves the next model exactly as a new one does (same iterates).
    """
    h = getattr(_LOCAL, "highs", None)
    if h is None:
        h = _LOCAL.highs = new_highs()
        return h
    h.clearModel()
    h.resetOptions()
    h.setOptionValue("output_flag", False)
    return h


def _solve_csc(
    c: FloatArray,
    csc: tuple[_Index, _Index, FloatArray],
    nrow: int,
    ncol: int,
    b_ub: FloatArray,
    ub: FloatArray,
    lb: FloatArray | None,
    method: str,
) -> tuple[FloatArray, FloatArray]:
    """:func:`solve_min` on a matrix already in CSC arrays (``indptr, indices, data``)."""
    indptr, indices, data = csc
    lo = np.zeros(ncol) if lb is None else np.asarray(lb, dtype=np.float64)
    hi = np.where(np.isinf(ub), highspy.kHighsInf, ub).astype(np.float64)
    cost = np.asarray(c, dtype=np.float64)
    row_lo = np.full(nrow, -highspy.kHighsInf)
    row_hi = np.asarray(b_ub, dtype=np.float64)
    h = _highs()
    status = h.passModel(
        ncol,
        nrow,
        int(indptr[-1]),
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        cost,
        lo,
        hi,
        row_lo,
        row_hi,
        np.asarray(indptr[:-1], dtype=np.int32),
        np.asarray(indices, dtype=np.int32),
        data.astype(np.float64),
        np.zeros(ncol, dtype=np.int32),  # every column continuous
    )
    if status == highspy.HighsStatus.kError:  # pragma: no cover - the array call changed
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = ncol, nrow
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lo, hi
        lp.row_lower_, lp.row_upper_ = row_lo, row_hi
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = ncol, nrow
        lp.a_matrix_.start_, lp.a_matrix_.index_ = indptr, indices
        lp.a_matrix_.value_ = data.astype(np.float64)
        h.passModel(lp)
    h.setOptionValue("solver", "simplex" if method == "simplex" else "ipm")
    if method == "ipm-interior":
        h.setOptionValue("run_crossover", "off")
        h.setOptionValue("ipm_optimality_tolerance", 1e-10)
        # Presolve is a sizeable share of a small solve and a replay solves thousands.
        # It only removes columns fixed at 0 here; without it the barrier may stop at a
        # slightly different interior point where such columns exist (another point of
        # the same optimal face, so the simulated JCTs move only a little).
        h.setOptionValue("presolve", "off")
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal and method != "simplex":
        # IPM without crossover can stop at "unknown" on tiny degenerate LPs: use simplex.
        h.setOptionValue("solver", "simplex")
        h.run()
        status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS: {h.modelStatusToString(status)}")
    sol = h.getSolution()
    return np.asarray(sol.col_value, dtype=np.float64), np.asarray(sol.row_dual, dtype=np.float64)


@dataclass(frozen=True)
class MaxMinResult:
    x: FloatArray
    level: float
    duals: FloatArray
    """Dual of each active job's ``U_m x >= t`` row (positive: the job is a bottleneck)."""


def max_min(
    U: sp.csr_matrix,
    A_base: sp.csr_matrix,
    b_base: FloatArray,
    ub: FloatArray,
    active: NDArray[np.bool_] | None = None,
    floor: FloatArray | None = None,
    pareto: bool = False,
    method: str = "ipm",
) -> MaxMinResult:
    """Maximise ``t`` s.t. ``(U x)_m >= t`` for active jobs, ``(U x)_m >= floor_m`` otherwise.

    ``U`` maps the allocation columns (without ``t``) to each job's utility, already
    divided by its weight. ``pareto`` adds a second LP that keeps every job at the optimal
    level and then maximises the sum of utilities (Gavel stops after the first LP).
    """
    n_jobs, nx = U.shape
    act = np.ones(n_jobs, dtype=bool) if active is None else active
    scale = float(abs(U).max()) if U.nnz else 1.0
    scale = scale if scale > 0 else 1.0
    if isinstance(U, sp.csr_matrix):  # its COO without scipy's conversions (same order)
        u_row = np.repeat(np.arange(n_jobs), np.diff(U.indptr))
        u_col, u_val = U.indices, U.data * (1.0 / scale)  # bit for bit what ``U / scale`` is
    else:
        uc = (U / scale).tocsr().tocoo()
        u_row, u_col, u_val = uc.row, uc.col, uc.data
    base = A_base.tocoo()
    coo = (base.row, base.col, base.data, u_row, u_col, u_val)
    res = _max_min_coo(coo, A_base.shape[0], n_jobs, nx, b_base, ub, act, floor, scale, method)
    if not (pareto and res.ia.size):
        return res.result
    # Keep each active job at (almost) the level, then maximise total utility.
    ia, ifz, t = res.ia, np.flatnonzero(~act), res.t
    lvl = t * (1 - 1e-7)
    Us = (U / scale).tocsr()
    A2 = sp.vstack([A_base, -Us[ia], *([-Us[ifz]] if ifz.size else [])]).tocsr()
    b2 = np.concatenate([b_base, np.full(ia.size, -lvl), *res.b_floor])
    c2 = -np.asarray(Us.sum(axis=0)).ravel()
    x2, _ = solve_min(c2, A2, b2, ub, method=method)
    return MaxMinResult(x=x2[:nx], level=t * scale, duals=res.result.duals)


def max_min_jobs(
    coef: FloatArray,
    sf: FloatArray,
    capacity: FloatArray,
    ub: FloatArray,
    active: NDArray[np.bool_],
    method: str = "ipm",
) -> MaxMinResult:
    """:func:`max_min` over single jobs with ``U = utility_matrix(coef)``, the base
    constraints of ``base_constraints(sf, capacity)`` and a zero floor — the same LP, handed
    to HiGHS in the same arrays, built with numpy alone (a simulation solves thousands)."""
    n, k = coef.shape
    jk = np.arange(n * k)
    flat = coef.ravel()
    scale = float(np.abs(flat).max()) if flat.size else 1.0
    scale = scale if scale > 0 else 1.0
    coo = (
        np.concatenate([jk // k, n + (jk % k)]),
        np.concatenate([jk, jk]),
        np.concatenate([np.ones(n * k), np.repeat(sf, k)]),
        np.repeat(np.arange(n), k),
        jk,
        flat * (1.0 / scale),
    )
    b_base = np.concatenate([np.ones(n), capacity])
    return _max_min_coo(coo, n + k, n, n * k, b_base, ub, active, np.zeros(n), scale, method).result


@dataclass(frozen=True)
class _FirstLp:
    result: MaxMinResult
    ia: IntArray
    t: float
    b_floor: list[FloatArray]


def _max_min_coo(
    coo: tuple[IntArray, IntArray, FloatArray, IntArray, IntArray, FloatArray],
    nb: int,
    n_jobs: int,
    nx: int,
    b_base: FloatArray,
    ub: FloatArray,
    act: NDArray[np.bool_],
    floor: FloatArray | None,
    scale: float,
    method: str,
) -> _FirstLp:
    """The max-min LP from the base constraints' and the scaled utilities' COO entries."""
    base_row, base_col, base_val, u_row, u_col, u_val = coo
    ia = np.flatnonzero(act)
    ifz = np.flatnonzero(~act)
    # One COO assembly (scipy's hstack/vstack cost a large share of a small LP's solve):
    # -U_m x + t <= 0 for active rows; -U_m x <= -floor_m for frozen rows.
    row_of = np.empty(n_jobs, dtype=np.int64)
    row_of[ia] = nb + np.arange(ia.size)
    row_of[ifz] = nb + ia.size + np.arange(ifz.size)
    rows = np.concatenate([base_row, row_of[u_row], nb + np.arange(ia.size)])
    cols = np.concatenate([base_col, u_col, np.full(ia.size, nx)])
    vals = np.concatenate([base_val, -u_val, np.ones(ia.size)])
    b_floor = []
    if ifz.size:
        assert floor is not None
        b_floor.append(-(floor[ifz] / scale) * (1 - 1e-9))
    b = np.concatenate([b_base, np.zeros(ia.size), *b_floor])
    c = np.zeros(nx + 1)
    c[-1] = -1.0
    ubt = np.concatenate([ub, [np.inf]])
    shape = (nb + n_jobs, nx + 1)
    csc = _csc_arrays(rows.astype(np.int64), cols.astype(np.int64), vals, nx + 1)
    if csc is None:  # repeated entries: let scipy sum them
        A = sp.csr_matrix((vals, (rows, cols)), shape=shape)
        x, duals = solve_min(c, A, b, ubt, method=method)
    else:
        x, duals = _solve_csc(c, csc, shape[0], shape[1], b, ubt, None, method)
    t = float(x[-1])
    full = np.zeros(n_jobs)
    full[ia] = -duals[nb : nb + ia.size]
    return _FirstLp(MaxMinResult(x=x[:nx], level=t * scale, duals=full), ia, t, b_floor)


def utility_matrix(coef: FloatArray, n_extra_cols: int = 0) -> sp.csr_matrix:
    """Sparse ``U`` for single jobs: ``(U x)_m = sum_j coef_mj X_mj`` (row-major columns)."""
    n, k = coef.shape  # row m: columns m k .. m k + k - 1, zeros kept (as scipy's COO)
    indptr = np.arange(0, n * k + 1, k)
    data = np.array(coef, dtype=np.float64).ravel()
    return sp.csr_matrix((data, np.arange(n * k), indptr), shape=(n, n * k + n_extra_cols))
