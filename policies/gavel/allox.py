"""AlloX (EuroSys'20): minimise average completion time by min-cost matching.

AlloX matches jobs to (GPU, position) slots: on one GPU, the job k-th from last adds
``k * p_mj`` to the total completion time, ``p_mj`` its remaining time there. GPUs of one
type are interchangeable, so instead of a bipartite graph over every GPU the slots are
collapsed to (type, position) with capacity ``num_gpus_j`` (in GPUs, so multi-GPU jobs
count ``sf``): a transportation LP, integral for single-GPU jobs, solved by HiGHS
simplex. The jobs that run now are, per type, the ones at the highest positions (first
in their GPU's sequence), ties to the shortest; they get ``X = 1`` there. Like Gavel's
AlloX, each job runs on one type at a time and the allocation is recomputed on every
arrival and completion.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.highs_model import INF, pass_lp, run_simplex
from lyra_ray.policies.gavel.inputs import FloatArray, build_problem, to_allocation
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import new_highs

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


def _transport(
    cost: FloatArray,
    ub: FloatArray,
    sf: FloatArray,
    capacity: FloatArray,
    runnable: NDArray[np.bool_],
    k: int,
    depth: int,
) -> FloatArray:
    """The (job, type, position) LP: each runnable job placed once (an equality row, not
    two inequalities), each (type, position) slot holding at most its type's GPUs.
    Built straight into CSC (column (m, j, q) has exactly two entries) and solved by
    dual simplex without presolve, which costs more than it saves on this simple
    structure (:func:`~lyra_ray.policies.gavel.highs_model.run_simplex`)."""
    n = runnable.shape[0]
    ncol = n * k * depth
    m_idx, j_idx, q_idx = np.unravel_index(np.arange(ncol), (n, k, depth))
    index = np.empty(2 * ncol, dtype=np.int32)
    index[0::2] = m_idx
    index[1::2] = n + j_idx * depth + q_idx
    value = np.empty(2 * ncol)
    value[0::2] = 1.0
    value[1::2] = sf[m_idx]
    nrow = n + k * depth
    A = sp.csc_matrix(
        (value, index, np.arange(0, 2 * ncol + 1, 2, dtype=np.int32)), shape=(nrow, ncol)
    )
    h = new_highs()
    pass_lp(
        h,
        A,
        cost,
        (np.zeros(ncol), ub),
        (
            np.concatenate([np.where(runnable, 1.0, -INF), np.full(k * depth, -INF)]),
            np.concatenate([np.ones(n), np.repeat(capacity, depth)]),
        ),
    )
    return run_simplex(h)


@register
class AlloX(PolicyBase):
    name: ClassVar[str] = "allox"
    # No type shuffle: Gavel's name for it is "AlloX_Perf", and Gavel shuffles only for
    # policies without "Perf" or "Packing" in the name.

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        n, k = p.n, p.k
        r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(n)
        ok = p.runnable
        proc = np.where(ok, r[:, None] / np.where(p.T > 0, p.T, 1.0), 0.0)
        depth = math.ceil(float(p.sf.sum()) / max(1.0, float(p.capacity.min()))) + 1
        depth = max(1, min(depth, n))
        pos = np.arange(1, depth + 1, dtype=np.float64)
        # column (m, j, q): job m on type j at position q (q-th from last)
        cost = (proc[:, :, None] * pos[None, None, :]).ravel()
        ub = np.repeat(ok.ravel().astype(np.float64), depth)
        big = float(cost.max(initial=1.0)) * 10 + 1.0
        cost = np.where(ub > 0, cost, big)
        runnable_jobs: NDArray[np.bool_] = np.asarray(ok.any(axis=1))
        z = _transport(cost, ub, p.sf, p.capacity, runnable_jobs, k, depth)
        z = z.reshape(n, k, depth)
        X = np.zeros((n, k))
        placed = z.reshape(n, -1).argmax(axis=1)
        jt, qt = np.unravel_index(placed, (k, depth))
        for j in range(k):
            mine = [m for m in range(n) if runnable_jobs[m] and jt[m] == j]
            mine.sort(key=lambda m: (-qt[m], proc[m, j]))
            left = p.capacity[j]
            for m in mine:
                if p.sf[m] <= left:
                    X[m, j] = 1.0
                    left -= p.sf[m]
        return to_allocation(p, X)
