"""Teams' quota rows in the columns of Gavel's LPs (:mod:`lyra_ray.model.team_bounds`).

A row bounds what some teams use of some GPU types: ``sum over the jobs it counts, over
the types it counts, of use <= rhs`` (a floor, ``>= rhs``, enters negated). In an LP
over time fractions a job's use of type ``j`` is ``sf_m X_mj`` GPUs (times the job's
reference units per GPU for effective quotas): the GPUs it holds on average, the same
quantity the capacity rows bound. A pair
occupies its GPUs once; each member is charged half of them, at its own units per GPU.

WHY the rows go into the same LP rather than in front of it: the LP still chooses each
job's types, and its pairs, relative to every other job; the rows only cap what a team
holds. So a team's job still moves to the type where it runs fastest relative to the
others, within its team's share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model.team_bounds import QuotaRow, TeamBounds
from lyra_ray.policies.gavel.inputs import FloatArray, Problem
from lyra_ray.policies.gavel.lazy_import import lazy_module

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

IntArray = NDArray[np.int64]


def _masks(
    p: Problem, bounds: TeamBounds, row: QuotaRow
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    jobs = np.array([row.counts(bounds.team(j.id, j.spec.user)) for j in p.jobs], dtype=bool)
    types = np.array([row.counts_type(g) for g in p.gpu_types], dtype=bool)
    return jobs.reshape(p.n), types.reshape(p.k)


def units_per_gpu(p: Problem, bounds: TeamBounds) -> FloatArray:
    """n x k: what one GPU of each type counts for each job's team (1 for GPU quotas)."""
    if not bounds.effective:
        return np.ones((p.n, p.k))
    return np.array(
        [[bounds.weight(j.id, g) for g in p.gpu_types] for j in p.jobs], dtype=np.float64
    ).reshape(p.n, p.k)


def rows_matrix(
    p: Problem,
    pair_idx: IntArray | None = None,
    pair_gpus: FloatArray | None = None,
    ncols: int | None = None,
) -> tuple[sp.csr_matrix, FloatArray]:
    """``(R, r)``: the problem's team rows as ``R x <= r`` over the LP's columns (singles
    ``m k + j``, then pairs ``(n + q) k + j``, then ``ncols`` in all, extra columns empty)."""
    bounds = p.bounds
    rows = () if bounds is None else bounds.rows
    n, k = p.n, p.k
    P = 0 if pair_idx is None else pair_idx.shape[0]
    width = (n + P) * k if ncols is None else ncols
    if bounds is None or not rows:
        return sp.csr_matrix((0, width)), np.zeros(0)
    W = units_per_gpu(p, bounds) * p.sf[:, None]
    r_i: list[IntArray] = []
    c_i: list[IntArray] = []
    v_i: list[FloatArray] = []
    for i, row in enumerate(rows):
        jm, tm = _masks(p, bounds, row)
        sign = -1.0 if row.floor else 1.0  # a floor: -use <= -claim
        coef = sign * W * jm[:, None] * tm[None, :]
        nz = np.flatnonzero(coef.ravel())
        r_i.append(np.full(nz.size, i, dtype=np.int64))
        c_i.append(nz.astype(np.int64))
        v_i.append(coef.ravel()[nz])
        if P:
            assert pair_idx is not None and pair_gpus is not None
            per = units_per_gpu(p, bounds)
            half = pair_gpus[:, None] / 2.0
            pc = np.zeros((P, k))
            for side in (0, 1):
                m = pair_idx[:, side]
                pc += sign * per[m] * jm[m][:, None] * tm[None, :] * half
            nzp = np.flatnonzero(pc.ravel())
            r_i.append(np.full(nzp.size, i, dtype=np.int64))
            c_i.append(n * k + nzp.astype(np.int64))
            v_i.append(pc.ravel()[nzp])
    R = sp.csr_matrix(
        (np.concatenate(v_i), (np.concatenate(r_i), np.concatenate(c_i))),
        shape=(len(rows), width),
    )
    rhs = [-row.rhs if row.floor else row.rhs for row in rows]
    return R, np.array(rhs, dtype=np.float64).reshape(len(rows))


def with_rows(
    A: sp.spmatrix,
    b: FloatArray,
    p: Problem,
    pair_idx: IntArray | None = None,
    pair_gpus: FloatArray | None = None,
) -> tuple[sp.csr_matrix, FloatArray]:
    """``A x <= b`` with the problem's team rows below (unchanged without any)."""
    if not p.team_rows:
        return A, b
    R, r = rows_matrix(p, pair_idx, pair_gpus, ncols=A.shape[1])
    return sp.vstack([A, R]).tocsr(), np.concatenate([b, r])


def rows_of_jobs(
    p: Problem, keep: NDArray[np.bool_] | None = None
) -> tuple[sp.csr_matrix, FloatArray] | None:
    """The team rows over single jobs only, restricted to the jobs in ``keep`` (columns
    ``i k + j`` for the ``i``-th kept job), as :func:`.ecos_centre.ecos_point` takes
    them; ``None`` without rows."""
    if not p.team_rows:
        return None
    R, r = rows_matrix(p, ncols=p.n * p.k)
    if keep is None:
        return R, r
    jobs = np.flatnonzero(keep)
    cols = (jobs[:, None] * p.k + np.arange(p.k)[None, :]).ravel()
    return R[:, cols].tocsr(), r
