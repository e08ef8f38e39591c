"""The LAS LP exactly as Gavel writes it, solved by ECOS, the solver Gavel itself uses.

Why ECOS and not HiGHS here: the LAS optimum is rarely unique (a job is indifferent
between GPU types that give it the same utility), and the round mechanism realises
whichever optimal X the solver returns, so the simulated JCTs depend on *which* optimum
comes back. Gavel solves ``Maximize(min_m sum_j c_mj x_mj)`` over
``x >= 0, sum_j x_mj <= 1, sum_m sf_m x_mj <= G_j`` with cvxpy + ECOS, an interior
point method that stops near the analytic centre of the optimal face. Handing ECOS the
same LP (same constraints: no ``x <= 1`` rows, which would tilt the centre) reproduces
that choice more closely than HiGHS's barrier does. It is also faster on the small LPs
a simulation solves by the thousand, where HiGHS's barrier spends most of its time in
fixed per-solve overhead.

The matrix is written straight into CSC arrays: every allocation column has the same
four entries (its job's utility row, its ``x >= 0`` row, its job's time row and its
type's capacity row), so numpy builds them without a sparse-matrix assembly. ECOS is set
up once per sparsity pattern and re-solved with each LP's numbers
(:mod:`.ecos_workspace`), the same answers to the bit as a setup per solve.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lyra_ray.policies.gavel import ecos_workspace
from lyra_ray.policies.gavel.ecos_workspace import Workspace
from lyra_ray.policies.gavel.lazy_import import lazy_module

if TYPE_CHECKING:
    import ecos
    import scipy.sparse as sp
else:  # ``ecos`` imports scipy.sparse (see lazy_import): only the fallback uses it
    ecos = lazy_module("ecos")
    sp = lazy_module("scipy.sparse")

try:  # ECOS's C entry point, which ``ecos.solve`` calls after checking a scipy matrix
    from _ecos import csolve as _csolve
except ImportError:  # pragma: no cover - a future ecos without it: the public call
    _csolve = None

FloatArray = NDArray[np.float64]
log = logging.getLogger(__name__)

_OPTIMAL = 0
_OPTIMAL_INACCURATE = 10  # ECOS's "close to optimal": tolerances met only loosely


class EcosFailed(RuntimeError):
    """ECOS stopped without an (approximately) optimal point; callers fall back."""


def solve_las_ecos(
    coef: FloatArray, sf: FloatArray, capacity: FloatArray, runnable: NDArray[np.bool_]
) -> tuple[FloatArray, float, FloatArray]:
    """Maximise ``t`` s.t. ``sum_j coef_mj x_mj >= t`` for every job with a runnable type.

    Columns exist only where ``runnable`` (elsewhere ``x`` is 0, as HiGHS's presolve
    would make it). Returns (X as n x k, the optimal level t, the dual of each job's
    utility row: positive for the jobs that bind the level).
    """
    n, k = coef.shape
    X = np.zeros((n, k))
    duals = np.zeros(n)
    key = (runnable.shape, np.packbits(runnable).tobytes())
    shape = _structure(runnable, key)
    if shape is None:
        return X, 0.0, duals
    keep, job, active, ones_data, rows, indptr, h_head, c = shape
    nx, na = keep.size, active.size
    # Column m's four entries: -U_m x | -x | time row | capacity row (see _structure).
    data = ones_data.copy()
    data[:, 0] = -coef.ravel()[keep]
    data[:, 3] = sf[job]
    nrow = 2 * na + nx + k
    values = np.concatenate([data.ravel(), np.ones(na)])
    h = np.concatenate([h_head, capacity.astype(np.float64)])
    flag, x, z, why = _solve_kept(key, c, (values, rows, indptr), nrow, h)
    if flag not in (_OPTIMAL, _OPTIMAL_INACCURATE):
        raise EcosFailed(f"ECOS exit flag {flag}: {why}")
    X.ravel()[keep] = np.maximum(x[:nx], 0.0)
    duals[active] = z[:na]
    return X, float(x[nx]), duals


_WORKSPACES: dict[Hashable, Workspace] = {}
"""ECOS set up per LP structure (:mod:`.ecos_workspace`), by a key that fixes the sparsity
pattern (here :data:`_STRUCTURES`' key; :mod:`.ecos_centre` keys by shape); bounded by
:data:`_MAX_WORKSPACES`, the least recently used freed first."""
_MAX_WORKSPACES = 64
_WORKSPACES_LOCK = threading.Lock()
_KEPT = {"usable": True}
"""Cleared for the process when a workspace reports a layout it does not know."""


def _solve_kept(
    key: Hashable,
    c: FloatArray,
    csc: tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]],
    nrow: int,
    h: FloatArray,
) -> tuple[int, FloatArray, FloatArray, str]:
    """(exit flag, x, z, ECOS's message) from this structure's kept workspace, set up at
    its first LP; ``csolve`` (:func:`_solve`) where workspaces cannot be used. The same
    answers to the bit either way (see :mod:`.ecos_workspace`)."""
    if _csolve is not None and _KEPT["usable"] and ecos_workspace.available():
        with _WORKSPACES_LOCK:  # one solver per workspace; the live scheduler may thread
            kept = _solve_in_workspace(key, c, csc, nrow, h)
        if kept is not None:
            return (*kept, "")
    sol = _solve(c, csc, nrow, h)
    x = np.asarray(sol["x"], dtype=np.float64)
    z = np.asarray(sol["z"], dtype=np.float64)
    return int(sol["info"]["exitFlag"]), x, z, str(sol["info"].get("infostring", ""))


def _solve_in_workspace(
    key: Hashable,
    c: FloatArray,
    csc: tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]],
    nrow: int,
    h: FloatArray,
) -> tuple[int, FloatArray, FloatArray] | None:
    """:func:`_solve_kept`'s kept path; None where the library's layout does not check out."""
    ws = _WORKSPACES.pop(key, None)
    try:
        if ws is not None:
            _WORKSPACES[key] = ws  # re-inserted: the dict's order is least recent first
            flag, x, z = ws.resolve(c, csc[0], h)
        else:
            while len(_WORKSPACES) >= _MAX_WORKSPACES:  # free the least recently used
                _WORKSPACES.pop(next(iter(_WORKSPACES))).close()
            ws = Workspace(c, csc, nrow, h)
            _WORKSPACES[key] = ws
            flag, x, z = ws.solve()
    except ecos_workspace.LayoutMismatch as e:
        log.warning("ECOS workspaces unavailable (%s): solving with csolve", e)
        _KEPT["usable"] = False
        return None
    except ecos_workspace.SetupFailed:  # this problem only: csolve reports it as it does
        return None
    if flag not in (_OPTIMAL, _OPTIMAL_INACCURATE):  # set it up afresh next time
        _WORKSPACES.pop(key).close()
    return flag, x, z


def _close_workspaces() -> None:
    """Free every kept workspace (ECOS's memory is not Python's: close explicitly)."""
    with _WORKSPACES_LOCK:
        for ws in _WORKSPACES.values():
            ws.close()
        _WORKSPACES.clear()


_Structure = tuple[
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    FloatArray,
    NDArray[np.int64],
    NDArray[np.int64],
    FloatArray,
    FloatArray,
]
_Key = tuple[tuple[int, ...], bytes]
_STRUCTURES: dict[_Key, _Structure | None] = {}
"""The LP's sparsity pattern by ``runnable`` (shape and bits): it depends on nothing
else, and a replay solves LPs of a few dozen job counts, nearly all runnable everywhere.
Read-only arrays; bounded by :data:`_MAX_STRUCTURES`."""
_MAX_STRUCTURES = 256


def _structure(runnable: NDArray[np.bool_], key: _Key) -> _Structure | None:
    """(kept columns, their jobs, active jobs, the constant entries, row indices, column
    pointers, the constant head of ``h``, the objective) for this pattern (``key``: its
    shape and packed bits); ``None`` where no column is kept."""
    if key in _STRUCTURES:
        return _STRUCTURES[key]
    n, k = runnable.shape
    keep = np.flatnonzero(runnable.ravel())
    nx = keep.size
    if nx == 0:
        out: _Structure | None = None
    else:
        job, typ = keep // k, keep % k
        active = np.flatnonzero(runnable.any(axis=1))
        na = active.size
        pos = np.empty(n, dtype=np.int64)
        pos[active] = np.arange(na)
        a = pos[job]
        cols = np.arange(nx)
        # Rows: [0, na) t - U_m x <= 0 | [na, na+nx) -x <= 0 | time rows | capacity rows.
        indices = np.empty((nx, 4), dtype=np.int64)
        indices[:, 0] = a
        indices[:, 1] = na + cols
        indices[:, 2] = na + nx + a
        indices[:, 3] = 2 * na + nx + typ
        data = np.empty((nx, 4))
        data[:, 1] = -1.0
        data[:, 2] = 1.0
        indptr = np.concatenate([np.arange(0, 4 * nx + 1, 4), [4 * nx + na]])
        rows = np.concatenate([indices.ravel(), np.arange(na)])
        h_head = np.concatenate([np.zeros(na + nx), np.ones(na)])
        c = np.zeros(nx + 1)
        c[-1] = -1.0
        out = (keep, job, active, data, rows, indptr, h_head, c)
        for arr in out:
            arr.flags.writeable = False
    if len(_STRUCTURES) >= _MAX_STRUCTURES:
        _STRUCTURES.clear()
    _STRUCTURES[key] = out
    return out


def _solve(
    c: FloatArray,
    csc: tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]],
    nrow: int,
    h: FloatArray,
) -> dict[str, Any]:
    """``ecos.solve(c, G, h, dims)`` for ``G`` given as CSC arrays, all rows linear.

    ``ecos.solve`` only unpacks a scipy matrix into these arrays and calls ECOS's C
    entry; building the scipy matrix (with its format checks) is a sizeable fraction of
    ECOS's own solve on a simulation's small LPs, so the arrays go to the C entry directly.
    The public call (same arguments, same answer) is used where the entry is missing.
    """
    values, rows, indptr = csc
    ncol = c.shape[0]
    dims = {"l": nrow, "q": [], "e": 0}
    if _csolve is None:  # see the import
        G = sp.csc_matrix((values, rows, indptr), shape=(nrow, ncol))
        sol: dict[str, Any] = ecos.solve(c, G, h, dims, verbose=False)
        return sol
    out: dict[str, Any] = _csolve((nrow, ncol, 0), c, values, rows, indptr, h, dims, verbose=False)
    return out
