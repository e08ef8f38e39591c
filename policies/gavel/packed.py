"""Space-sharing ("packed") variants over jobs and pairs: LAS, makespan, water-filling,
finish-time fairness and cost with SLOs (Gavel's ``*_packed`` / ``*_packed_SLOs``).

Variables are X for single jobs and for the pruned candidate pairs
(:mod:`lyra_ray.policies.gavel.pairs`; ``pair_set="all"`` solves on every pair, as Gavel
does, to measure what pruning costs). A job's time constraint counts its pairs; a pair uses its
GPUs once. A job's throughput adds what it gets inside each pair. Normalisation follows
Gavel's packed LAS: throughput over the sum of its alone-throughputs across types, times
scale factor, over priority weight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.cost import DEFAULT_PRICES, prices, slo_floors
from lyra_ray.policies.gavel.finish_time_fairness import (
    FinishTimeFairnessPerf,
    ftf_inputs,
    solve_rho,
)
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import SolverError, base_constraints, max_min, solve_min
from lyra_ray.policies.gavel.pairs import Pairs, PairSet, candidate_pairs, checked_pair_set
from lyra_ray.policies.gavel.team_rows import with_rows
from lyra_ray.policies.gavel.water_filling import hierarchical_weights, water_fill

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")


def packed_utility(p: Problem, pairs: Pairs, per_job: FloatArray) -> sp.csr_matrix:
    """Rows: jobs; ``(U x)_m = per_job_m * throughput of m`` over singles and pairs."""
    k, P = p.k, pairs.size
    T = p.T * p.runnable
    rows = [np.repeat(np.arange(p.n), k)]
    cols = [np.arange(p.n * k)]
    vals = [(T * per_job[:, None]).ravel()]
    for side in (0, 1):
        members = pairs.idx[:, side]
        rows.append(np.repeat(members, k))
        cols.append(p.n * k + np.arange(P * k))
        vals.append((pairs.thr[:, :, side] * per_job[members][:, None]).ravel())
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(p.n, (p.n + P) * k),
    )


def _setup(
    snap: ClusterSnapshot, p: Problem, top_k: int, pair_set: PairSet = "pruned"
) -> tuple[Pairs, sp.csr_matrix, FloatArray, FloatArray, NDArray[np.bool_]]:
    pairs = candidate_pairs(snap, p, top_k, pair_set)
    A, b = with_rows(
        *base_constraints(p.sf, p.capacity, pairs.idx, pairs.gpus), p, pairs.idx, pairs.gpus
    )
    pair_ok = (pairs.thr > 0).all(axis=2) & (pairs.gpus[:, None] <= p.capacity[None, :])
    closed: NDArray[np.bool_] = p.closed
    shut: NDArray[np.bool_] = np.asarray(closed[pairs.idx].any(axis=1), dtype=bool)
    pair_ok &= ~shut[:, None]
    ub = np.concatenate([p.runnable.ravel(), pair_ok.ravel()]).astype(np.float64)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    return pairs, A, b, ub, active


def _las_scale(p: Problem) -> FloatArray:
    total = (p.T * p.runnable).sum(axis=1)
    out: FloatArray = p.sf / (p.weights * np.where(total > 0, total, 1.0))
    return out


def _split(p: Problem, pairs: Pairs, x: FloatArray) -> Allocation:
    X = x[: p.n * p.k].reshape(p.n, p.k)
    Xp = x[p.n * p.k :].reshape(pairs.size, p.k)
    return to_allocation(p, X, {key: Xp[i] for i, key in enumerate(pairs.keys)})


def solve_packed_las(
    snap: ClusterSnapshot, p: Problem, top_k: int = 8, pair_set: PairSet = "pruned"
) -> tuple[Allocation, float]:
    pairs, A, b, ub, active = _setup(snap, p, top_k, pair_set)
    U = packed_utility(p, pairs, _las_scale(p))
    res = max_min(U, A, b, ub, active=active, floor=np.zeros(p.n))
    return _split(p, pairs, res.x), res.level


class _Packed(PolicyBase):
    name: ClassVar[str]

    def __init__(self, top_k: int = 8, pair_set: PairSet = "pruned") -> None:
        self.top_k = top_k
        self.pair_set = checked_pair_set(pair_set)

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        return self._solve(snap, p)

    def _solve(self, snap: ClusterSnapshot, p: Problem) -> Allocation:
        raise NotImplementedError


@register
class MaxMinFairnessPacked(_Packed):
    name: ClassVar[str] = "max_min_fairness_packed"

    def _solve(self, snap: ClusterSnapshot, p: Problem) -> Allocation:
        return solve_packed_las(snap, p, self.top_k, self.pair_set)[0]


@register
class MinTotalDurationPacked(_Packed):
    name: ClassVar[str] = "min_total_duration_packed"

    def _solve(self, snap: ClusterSnapshot, p: Problem) -> Allocation:
        pairs, A, b, ub, active = _setup(snap, p, self.top_k, self.pair_set)
        r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
        res = max_min(
            packed_utility(p, pairs, 1.0 / r), A, b, ub, active=active, floor=np.zeros(p.n)
        )
        return _split(p, pairs, res.x)


@register
class MaxMinFairnessWaterFillingPacked(_Packed):
    name: ClassVar[str] = "max_min_fairness_water_filling_packed"

    def _solve(self, snap: ClusterSnapshot, p: Problem) -> Allocation:
        pairs, A, b, ub, active = _setup(snap, p, self.top_k, self.pair_set)
        per_job = _las_scale(p) * p.weights / hierarchical_weights(p, snap.entity_weights)
        x, _ = water_fill(packed_utility(p, pairs, per_job), A, b, ub, active)
        return _split(p, pairs, x)


@register
class FinishTimeFairnessPacked(FinishTimeFairnessPerf):
    """Finish-time fairness where a job's throughput counts its pairs (Gavel's
    ``FinishTimeFairnessPolicyWithPacking``): same rho, same isolated yardstick (the
    job alone on the equal split), same cumulative isolated time."""

    name: ClassVar[str] = "finish_time_fairness_packed"

    def __init__(self, top_k: int = 8, pair_set: PairSet = "pruned") -> None:
        super().__init__()
        self.top_k = top_k
        self.pair_set = checked_pair_set(pair_set)

    def _solve(self, snap: ClusterSnapshot, p: Problem, done: FloatArray) -> Allocation:
        pairs, A, b, ub, active = _setup(snap, p, self.top_k, self.pair_set)
        if not active.any():
            return to_allocation(p, np.zeros((p.n, p.k)))
        t, r, bound = ftf_inputs(p, snap.now, done)
        U = packed_utility(p, pairs, np.ones(p.n)).tocsr()
        x, _ = solve_rho(U, A, b, ub, active, t, r, bound)
        return _split(p, pairs, x)


@register
class MaxSumThroughputNormalizedByCostPackedSLOs(_Packed):
    """Throughput per dollar over jobs and pairs, with SLO rows (Gavel's
    ``ThroughputNormalizedByCostSumWithPackingSLOs``): maximise the sum over jobs of
    their throughput (alone and in pairs) divided by the GPU type's price, subject to
    ``throughput(m) >= remaining_m / time_left_m`` for jobs with an SLO; SLO rows that
    make the LP infeasible are dropped, as Gavel does."""

    name: ClassVar[str] = "max_sum_throughput_normalized_by_cost_packed_SLOs"

    def __init__(
        self,
        top_k: int = 8,
        prices: Mapping[GpuType, float] | None = None,
        pair_set: PairSet = "pruned",
    ) -> None:
        super().__init__(top_k, pair_set)
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    def _solve(self, snap: ClusterSnapshot, p: Problem) -> Allocation:
        pairs, A, b, ub, _ = _setup(snap, p, self.top_k, self.pair_set)
        U = packed_utility(p, pairs, np.ones(p.n)).tocsr()
        per_col = np.tile(prices(p, self.prices), p.n + pairs.size)
        c = -np.asarray(U.sum(axis=0)).ravel() / per_col
        floors = slo_floors(p, snap.now)
        if floors:
            rows = np.array(sorted(floors), dtype=np.int64)
            A2 = sp.vstack([A, -U[rows]]).tocsr()
            b2 = np.concatenate([b, -np.array([floors[int(i)] for i in rows])])
            try:
                return _split(p, pairs, solve_min(c, A2, b2, ub)[0])
            except SolverError:
                pass
        return _split(p, pairs, solve_min(c, A, b, ub)[0])
