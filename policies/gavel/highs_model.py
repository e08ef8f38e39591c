"""Building a HiGHS LP from column-wise sparse data, shared by the direct-HiGHS policies.

Some policies hand HiGHS a prebuilt CSC matrix instead of going through a modelling
layer, whose per-solve overhead would dominate these LPs; this is the one place that
knows HiGHS's ``HighsLp`` fields, so each policy only states its matrix, bounds and cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lyra_ray.policies.gavel.inputs import FloatArray
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import SolverError

if TYPE_CHECKING:
    import highspy
    import scipy.sparse as sp
else:  # imported at first use: see lazy_import
    highspy = lazy_module("highspy")
    sp = lazy_module("scipy.sparse")

INF = float("inf")
"""HiGHS's ``kHighsInf`` (it is IEEE infinity), without importing HiGHS to read it."""


def pass_lp(
    h: Any,
    A: sp.csc_matrix,
    cost: FloatArray,
    col_bounds: tuple[FloatArray, FloatArray],
    row_bounds: tuple[FloatArray, FloatArray],
) -> None:
    """Load ``min cost·x  s.t. row_lo <= A x <= row_hi, col_lo <= x <= col_hi`` into ``h``."""
    nrow, ncol = A.shape
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, nrow
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_, lp.col_upper_ = (np.asarray(b, dtype=np.float64) for b in col_bounds)
    lp.row_lower_, lp.row_upper_ = (np.asarray(b, dtype=np.float64) for b in row_bounds)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = ncol, nrow
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    h.passModel(lp)


def run_simplex(h: Any) -> FloatArray:
    """Solve by dual simplex without presolve (from the slack basis these LPs need only
    a few pivots per job, so presolve only costs time) and return the column values."""
    h.setOptionValue("solver", "simplex")
    h.setOptionValue("presolve", "off")
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS: {h.modelStatusToString(status)}")
    return np.asarray(h.getSolution().col_value, dtype=np.float64)
