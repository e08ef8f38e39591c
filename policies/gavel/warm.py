"""A max-min LP kept alive in HiGHS across a sequence of closely related solves.

Water-filling (freeze the bottleneck jobs, raise the rest) and finish-time fairness
(move rho, re-solve) solve the same LP again and again with a few coefficients or
bounds changed. Rebuilding and cold-solving each one pays for the model build and a
full solve every time; keeping the model and warm-starting dual simplex from the previous
basis costs a few pivots. The first solve runs interior point + crossover (faster than a
cold simplex here) to get that basis.

Model: ``max t`` s.t. ``A_base x <= b``; row m: ``-U_m x + d_m t <= -floor_m``;
``0 <= x <= ub``. ``d_m = 1, floor_m = 0`` for a job still rising; ``d_m = 0,
floor_m = level`` for a frozen one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import FloatArray, SolverError, new_highs

if TYPE_CHECKING:
    import highspy
    import scipy.sparse as sp
else:  # imported at first use: see lazy_import
    highspy = lazy_module("highspy")
    sp = lazy_module("scipy.sparse")


class WarmMaxMin:
    def __init__(
        self,
        U: sp.csr_matrix,
        A_base: sp.csr_matrix,
        b_base: FloatArray,
        ub: FloatArray,
        demand: FloatArray,
        primal: bool = False,
    ) -> None:
        """``primal``: re-solve with primal simplex (freezing keeps the point feasible)."""
        self.primal = primal
        n, nx = U.shape
        self.n, self.nx, self.nb = n, nx, A_base.shape[0]
        self.scale, A = stacked(U, A_base, demand)
        d = np.asarray(demand, dtype=np.float64).reshape(n, 1)
        nrow, ncol = A.shape
        self.h: Any = new_highs()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = ncol, nrow
        cost = np.zeros(ncol)
        cost[-1] = -1.0
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(ncol)
        lp.col_upper_ = np.concatenate([ub, [highspy.kHighsInf]])
        lp.row_lower_ = np.full(nrow, -highspy.kHighsInf)
        lp.row_upper_ = np.concatenate([b_base, np.zeros(n)])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = ncol, nrow
        lp.a_matrix_.start_ = A.indptr
        lp.a_matrix_.index_ = A.indices
        lp.a_matrix_.value_ = A.data
        self.h.passModel(lp)
        self.h.setOptionValue("solver", "ipm")
        self.h.setOptionValue("run_crossover", "on")
        self._demand = d.ravel().copy()
        self._first = True

    def set_demand(self, demand: FloatArray) -> None:
        """New t-coefficient per job row (FTF's ``d_m(rho)``; 0 keeps a row frozen)."""
        t_col = self.nx
        for m in np.flatnonzero(demand != self._demand):
            self.h.changeCoeff(int(self.nb + m), t_col, float(demand[m]))
        self._demand = np.asarray(demand, dtype=np.float64).copy()

    def freeze(self, rows: NDArray[np.int64], floor: FloatArray) -> None:
        """Pin ``U_m x >= floor_m`` and take job m out of the rising set."""
        for m, f in zip(rows, floor, strict=True):
            self.h.changeCoeff(int(self.nb + m), self.nx, 0.0)
            self.h.changeRowBounds(int(self.nb + m), -highspy.kHighsInf, -float(f) / self.scale)
            self._demand[int(m)] = 0.0

    def solve(self) -> tuple[FloatArray, float, FloatArray]:
        """(x, t in U's units, dual of each job row: > 0 means a bottleneck)."""
        if not self._first:
            # Warm start from the last basis; presolve would discard it.
            self.h.setOptionValue("solver", "simplex")
            self.h.setOptionValue("presolve", "off")
            if self.primal:
                self.h.setOptionValue("simplex_strategy", 4)
        self._first = False
        self.h.run()
        status = self.h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"HiGHS: {self.h.modelStatusToString(status)}")
        sol = self.h.getSolution()
        col = np.asarray(sol.col_value, dtype=np.float64)
        duals = -np.asarray(sol.row_dual, dtype=np.float64)[self.nb :]
        return col[: self.nx], float(col[-1]) * self.scale, duals


def stacked(
    U: sp.csr_matrix, A_base: sp.csr_matrix, demand: FloatArray
) -> tuple[float, sp.csc_matrix]:
    """(scale, ``[[A_base, 0], [-U / scale, demand]]`` in CSC): the model's matrix.

    Written as one CSR (``A_base``'s rows, then each job's utility row with its demand
    entry appended in the last column where non-zero) and converted once: the same
    arrays, bit for bit, as stacking the blocks with scipy's ``hstack``/``vstack``
    (:func:`stacked_reference`, ``tests/unit/test_warm_stack.py``), at a quarter of the
    cost, which finish-time fairness pays at every solve of a replay.
    """
    U, A_base = U.tocsr(), A_base.tocsr()
    n, nx = U.shape
    nb = A_base.shape[0]
    scale = float(np.abs(U.data).max()) if U.nnz else 1.0  # abs(U).max(), zeros aside
    scale = scale if scale > 0 else 1.0
    d = np.asarray(demand, dtype=np.float64).ravel()
    has = d != 0  # scipy drops a dense zero
    lens = np.diff(U.indptr)
    indptr = np.concatenate([A_base.indptr, A_base.indptr[-1] + np.cumsum(lens + has)])
    data = np.empty(int(indptr[-1]))
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    data[: A_base.nnz] = A_base.data
    indices[: A_base.nnz] = A_base.indices
    pos = np.repeat(indptr[nb:-1] - U.indptr[:-1], lens) + np.arange(U.nnz)
    data[pos] = -(U.data * (1.0 / scale))  # scipy divides by a scalar as this product
    indices[pos] = U.indices
    last = indptr[nb + 1 :][has] - 1
    data[last] = d[has]
    indices[last] = nx
    return scale, sp.csr_matrix((data, indices, indptr), shape=(nb + n, nx + 1)).tocsc()


def stacked_reference(
    U: sp.csr_matrix, A_base: sp.csr_matrix, demand: FloatArray
) -> tuple[float, sp.csc_matrix]:
    """:func:`stacked` through scipy's block stacking (what the model was built from)."""
    n = U.shape[0]
    nb = A_base.shape[0]
    scale = float(abs(U).max()) if U.nnz else 1.0
    scale = scale if scale > 0 else 1.0
    Us = (U / scale).tocsr()
    d = np.asarray(demand, dtype=np.float64).reshape(n, 1)
    A = sp.vstack(
        [sp.hstack([A_base, sp.csr_matrix((nb, 1))]), sp.hstack([-Us, sp.csr_matrix(d)])]
    ).tocsc()
    return scale, A
