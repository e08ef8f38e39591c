"""A max-min LP whose water-filling steps are pure bound changes, kept alive in HiGHS.

Water-filling re-solves one LP many times: raise the common level ``t`` of the jobs
still rising, freeze the ones that cannot go higher, repeat. Written as rows
``U_m x >= t`` a freeze has to change the ``t`` coefficient of row m, a matrix edit
that leaves HiGHS's warm dual simplex far from the new optimum (many pivots per re-solve).
Here every job gets a utility column ``z_m`` instead::

    max t   s.t.  A_base x <= b,   U_m x - z_m >= 0,   z_m - t >= 0 (rising jobs only),
                  0 <= x <= ub,    z_m >= floor_m

so freezing job m at a level is ``floor_m = level`` plus dropping its ``z_m - t`` row
(lower bound made non-binding), and the matrix never changes; every re-solve
warm-starts dual simplex from the previous basis.
Everything inside is in units of ``U / scale`` (the largest utility coefficient is 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.highs_model import INF, pass_lp
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import FloatArray, new_highs

if TYPE_CHECKING:
    import highspy
    import scipy.sparse as sp
else:  # imported at first use: see lazy_import
    highspy = lazy_module("highspy")
    sp = lazy_module("scipy.sparse")


@dataclass(frozen=True)
class LevelSolution:
    x: FloatArray
    t: float
    """The common level of the rising jobs, in scaled units."""
    duals: FloatArray
    """Dual of each job's ``z_m - t >= 0`` row, >= 0; positive means a bottleneck."""


class LevelLP:
    def __init__(
        self,
        U: sp.csr_matrix,
        A_base: sp.csr_matrix,
        b_base: FloatArray,
        ub: FloatArray,
    ) -> None:
        n, nx = U.shape
        nb = A_base.shape[0]
        self.n, self.nx, self.nb = n, nx, nb
        scale = float(abs(U).max()) if U.nnz else 1.0
        self.scale = scale if scale > 0 else 1.0
        Us = (U / self.scale).tocsr()
        uc = Us.tocoo()
        # No utility exceeds ``top``: it bounds t (rising set empty) and a dropped
        # ``z_m - t`` row gets lower bound -top instead of -inf, so dropping it keeps
        # the basis dual feasible (a free nonbasic row would not be) and dual simplex
        # restarts from it with a few pivots.
        ubf = np.where(np.isfinite(ub), ub, 1e3)
        self.top = float((abs(Us) @ ubf).max(initial=0.0)) + 1.0
        base = A_base.tocoo()
        jobs = np.arange(n)
        z_col = nx + jobs
        t_col = nx + n
        rows = np.concatenate([base.row, nb + uc.row, nb + jobs, nb + n + jobs, nb + n + jobs])
        cols = np.concatenate([base.col, uc.col, z_col, z_col, np.full(n, t_col)])
        vals = np.concatenate([base.data, uc.data, -np.ones(n), np.ones(n), -np.ones(n)])
        nrow, ncol = nb + 2 * n, nx + n + 1
        A = sp.csc_matrix((vals.astype(np.float64), (rows, cols)), shape=(nrow, ncol))
        cost = np.zeros(ncol)
        cost[-1] = -1.0
        ubx = np.where(np.isinf(ub), INF, ub).astype(np.float64)
        self.h: Any = new_highs()
        pass_lp(
            self.h,
            A,
            cost,
            (np.zeros(ncol), np.concatenate([ubx, np.full(n, INF), [self.top]])),
            (
                np.concatenate([np.full(nb, -INF), np.zeros(2 * n)]),
                np.concatenate([np.asarray(b_base, dtype=np.float64), np.full(2 * n, INF)]),
            ),
        )
        # Dual simplex throughout, presolve off even for the cold start: after a
        # presolved first solve the first warm re-solve needs orders of magnitude more
        # pivots than after an unpresolved one, and a cold dual simplex is as fast as
        # interior point on these LPs anyway.
        self.h.setOptionValue("solver", "simplex")
        self.h.setOptionValue("presolve", "off")
        self.floor = np.zeros(n)
        self.rising = np.ones(n, dtype=bool)

    def set_jobs(self, rising: NDArray[np.bool_], floor: FloatArray) -> None:
        """Which jobs share the level ``t``, and every job's utility floor (scaled)."""
        changed = np.flatnonzero(rising != self.rising)
        if changed.size:
            lo = np.where(rising[changed], 0.0, -self.top)
            self.h.changeRowsBounds(
                changed.size,
                (self.nb + self.n + changed).astype(np.int32),
                lo,
                np.full(changed.size, INF),
            )
        moved = np.flatnonzero(floor != self.floor)
        if moved.size:
            self.h.changeColsBounds(
                moved.size,
                (self.nx + moved).astype(np.int32),
                floor[moved].astype(np.float64),
                np.full(moved.size, INF),
            )
        self.rising = rising.copy()
        self.floor = floor.astype(np.float64).copy()

    def solve(self) -> LevelSolution | None:
        """The optimum, or None when the floors cannot all be met."""
        self.h.run()
        status = self.h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        sol = self.h.getSolution()
        col = np.asarray(sol.col_value, dtype=np.float64)
        row_dual = np.asarray(sol.row_dual, dtype=np.float64)
        duals = np.abs(row_dual[self.nb + self.n :]) * self.rising
        return LevelSolution(x=col[: self.nx], t=float(col[-1]), duals=duals)

    def iterations(self) -> int:
        return int(self.h.getInfo().simplex_iteration_count)
