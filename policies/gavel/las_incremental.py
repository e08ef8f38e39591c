"""The LAS max-min LP kept alive in HiGHS across a simulation's rounds.

A replay solves the LAS LP once per change of the job set (thousands of times on a
long trace), and consecutive LPs differ by a job or two arriving or leaving. A cold
interior-point solve of such a small LP is mostly HiGHS's fixed start-up; here
the model stays loaded and each job owns a *slot* (k allocation columns and two rows),
so an arrival writes the job's coefficients into a free slot and a departure zeroes
the slot's column bounds. Dual simplex then restarts from the previous optimal basis
and needs a handful of pivots.

Slot ``s`` (job m), with ``t`` the max-min level::

    time:     sum_j x_sj            <= 1
    level:    sum_j c_mj x_sj - t   >= lo_s     (lo_s = 0 for an active job, -top else)
    capacity: sum_s sf_s x_sj       <= cap_j    (one row per GPU type)
    bounds:   0 <= x_sj <= ub_mj (0 for a free slot),  0 <= t <= top

A job that is inactive (or a free slot) keeps a finite row bound ``-top`` rather than
``-inf``, so the basis stays dual feasible and the warm start survives.

The answer is an optimal *vertex* with the same level as the cold solve (to solver
tolerance), not the interior point ``ipm-interior`` stops at, so which of several
equally fair allocations comes out can differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel.highs_model import INF, pass_lp
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import FloatArray, SolverError, new_highs

if TYPE_CHECKING:
    import highspy
    import scipy.sparse as sp
else:  # imported at first use: see lazy_import
    highspy = lazy_module("highspy")
    sp = lazy_module("scipy.sparse")

_SAME = 1e-12
"""Relative change of a coefficient below which the live model keeps the old value."""


class IncrementalLas:
    """One live LAS model; :meth:`solve` takes the whole problem and edits the difference."""

    def __init__(self, k: int, slots: int = 64) -> None:
        self.k = k
        self.h: Any = None
        self.n_slots = 0
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.top = 0.0
        self.cap = np.zeros(k)
        self.coef = np.zeros((0, k))
        self.sf = np.zeros(0)
        self.ub = np.zeros((0, k))
        self.lo = np.zeros(0)
        self._want_slots = slots
        self.solves = 0

    # ------------------------------------------------------------------ model

    def _build(self, slots: int, top: float, capacity: FloatArray) -> None:
        """A fresh model with ``slots`` empty slots (every job is re-placed after this)."""
        k, S = self.k, slots
        self.n_slots, self.top = S, top
        self.cap = np.asarray(capacity, dtype=np.float64).copy()
        self.coef = np.zeros((S, k))
        self.sf = np.ones(S)
        self.ub = np.zeros((S, k))
        self.lo = np.full(S, -top)
        self.slot_of = {}
        self.free = list(range(S - 1, -1, -1))
        # Rows: time (S), level (S), capacity (k). Columns: x (S*k, row-major), t.
        sk = np.arange(S * k)
        s_of = sk // k
        rows = np.concatenate([s_of, S + s_of, 2 * S + (sk % k), S + np.arange(S)])
        cols = np.concatenate([sk, sk, sk, np.full(S, S * k)])
        # Level coefficients and scale factors start at 1 (not 0), so each has a stored
        # matrix entry that later changes overwrite in place.
        vals = np.concatenate([np.ones(S * k), np.ones(S * k), np.ones(S * k), -np.ones(S)])
        A = sp.csc_matrix((vals, (rows, cols)), shape=(2 * S + k, S * k + 1))
        cost = np.zeros(S * k + 1)
        cost[-1] = -1.0
        self.h = new_highs()
        pass_lp(
            self.h,
            A,
            cost,
            (np.zeros(S * k + 1), np.concatenate([np.zeros(S * k), [top]])),
            (
                np.concatenate([np.full(S, -INF), self.lo, np.full(k, -INF)]),
                np.concatenate([np.ones(S), np.full(S, INF), self.cap]),
            ),
        )
        self.h.setOptionValue("solver", "simplex")
        self.h.setOptionValue("presolve", "off")

    def _place(self, jid: str) -> int:
        s = self.free.pop()
        self.slot_of[jid] = s
        return s

    def _release(self, jid: str) -> None:
        s = self.slot_of.pop(jid)
        self.free.append(s)
        k = self.k
        idx = (s * k + np.arange(k)).astype(np.int32)
        self.h.changeColsBounds(k, idx, np.zeros(k), np.zeros(k))
        self.ub[s] = 0.0
        if self.lo[s] != -self.top:
            self.h.changeRowBounds(self.n_slots + s, -self.top, INF)
            self.lo[s] = -self.top

    def _write(self, s: int, coef: FloatArray, sf: float, ub: FloatArray, active: bool) -> None:
        """Make slot ``s`` hold a job: coefficients, scale factor, bounds, row bound."""
        h, k, S = self.h, self.k, self.n_slots
        old = self.coef[s]
        moved = np.flatnonzero(np.abs(coef - old) > _SAME * np.maximum(np.abs(old), 1.0))
        for jm in moved:
            h.changeCoeff(S + s, int(s * k + jm), float(coef[jm]))
        old[moved] = coef[moved]  # a view: writes the stored row
        if sf != self.sf[s]:
            for j in range(k):
                h.changeCoeff(2 * S + j, int(s * k + j), float(sf))
            self.sf[s] = sf
        if not np.array_equal(ub, self.ub[s]):
            idx = (s * k + np.arange(k)).astype(np.int32)
            h.changeColsBounds(k, idx, np.zeros(k), np.asarray(ub, dtype=np.float64))
            self.ub[s] = ub
        lo = 0.0 if active else -self.top
        if lo != self.lo[s]:
            h.changeRowBounds(S + s, lo, INF)
            self.lo[s] = lo

    # ------------------------------------------------------------------ solve

    def solve(
        self,
        job_ids: Sequence[str],
        coef: FloatArray,
        sf: FloatArray,
        capacity: FloatArray,
        ub: FloatArray,
        active: NDArray[np.bool_],
    ) -> tuple[FloatArray, float]:
        """(X over ``job_ids`` x types, level t) of ``max t`` s.t. ``coef_m . X_m >= t``
        for active m, plus the time and capacity constraints; ``ub`` is n x k."""
        for attempt in range(3):
            # 0: warm start; 1: same model, basis dropped; 2: a freshly built model.
            if attempt == 1:
                self.h.clearSolver()
            elif attempt == 2:
                self.h = None
            slots = self._load(job_ids, coef, sf, capacity, ub, active)
            self.h.run()
            if self.h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
                break
        else:
            status = self.h.getModelStatus()
            self.h = None
            raise SolverError(f"HiGHS: {status}")
        self.solves += 1
        col = np.asarray(self.h.getSolution().col_value, dtype=np.float64)
        x = col[:-1].reshape(self.n_slots, self.k)[slots]
        return np.clip(x, 0.0, ub), float(col[-1])

    def _load(
        self,
        job_ids: Sequence[str],
        coef: FloatArray,
        sf: FloatArray,
        capacity: FloatArray,
        ub: FloatArray,
        active: NDArray[np.bool_],
    ) -> NDArray[np.int64]:
        """Bring the live model to this problem; returns each job's slot."""
        n, k = coef.shape
        assert k == self.k
        # t never exceeds the best coefficient of any active job; a bound twice that
        # is never binding and keeps the inactive rows' bound finite.
        need_top = float(coef[active].max(axis=1).min()) if active.any() else 1.0
        if (
            self.h is None
            or need_top * 2.0 > self.top
            or n > self.n_slots
            or not np.array_equal(capacity, self.cap)
        ):
            slots = max(self._want_slots, self.n_slots, 2 * n)
            self._build(slots, max(4.0 * need_top, self.top), capacity)
        ids = set(job_ids)
        for jid in [j for j in self.slot_of if j not in ids]:
            self._release(jid)
        at = np.empty(n, dtype=np.int64)
        slot_of = self.slot_of
        for i, jid in enumerate(job_ids):
            s = slot_of.get(jid)
            at[i] = self._place(jid) if s is None else s
        # Only the slots whose data differ are written (a handful per solve). A job's
        # coefficients are recomputed every time and move in the last bits as the job
        # count changes (Gavel's isolated share divides by n, then normalises): such a
        # change is no change.
        lo = np.where(active, 0.0, -self.top)
        old = self.coef[at]
        dirty = (
            (np.abs(coef - old) > _SAME * np.maximum(np.abs(old), 1.0)).any(axis=1)
            | (sf != self.sf[at])
            | (ub != self.ub[at]).any(axis=1)
            | (lo != self.lo[at])
        )
        for d in np.flatnonzero(dirty):
            self._write(int(at[d]), coef[d], float(sf[d]), ub[d], bool(active[d]))
        return at
