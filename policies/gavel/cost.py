"""Throughput per dollar, with and without SLOs: Gavel's ``..._normalized_by_cost_perf``.

The objective divides each GPU type's throughput by its hourly price, so cheap GPUs win
unless a job's SLO (``JobSpec.slo_s``: seconds after arrival by which it must finish)
forces it onto faster ones: ``throughput(m, X) >= remaining_m / (arrival_m + slo_m -
now)``. Jobs already past their deadline get no SLO row (they cannot meet it anyway).
If the SLOs are jointly infeasible, the LP falls back to no SLOs, as Gavel does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType
from lyra_ray.model.prices import gpu_hour_prices
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from lyra_ray.policies.gavel.max_sum_throughput import centre_of_sum, solve_sum

DEFAULT_PRICES: dict[GpuType, float] = gpu_hour_prices()
"""USD per GPU-hour by GPU type: the list prices shipped with the project
(``lyra_ray/model/data/prices.json``, each with its source and date): Gavel's three
types (v100, p100, k80, as before) and every GPU type of cluster.yaml (a100, t4). A
GPU type with no price is priced at 1.0 (``prices``); give the policy ``prices`` for
yours (``policy_args``; the live scheduler passes the node types' own prices)."""


def slo_floors(p: Problem, now: float) -> dict[int, float]:
    floors: dict[int, float] = {}
    for i, job in enumerate(p.jobs):
        if job.spec.slo_s is None or job.spec.slo_s <= 0:
            continue
        left = job.arrival_s + job.spec.slo_s - now
        if left > 0 and p.runnable[i].any():
            floors[i] = job.remaining_steps / left
    return floors


def prices(p: Problem, table: Mapping[GpuType, float]) -> FloatArray:
    return np.array([float(table.get(g, 1.0)) for g in p.gpu_types]).reshape(p.k)


@register
class MaxSumThroughputNormalizedByCostPerf(PolicyBase):
    """Maximise total throughput per dollar (no SLOs)."""

    name: ClassVar[str] = "max_sum_throughput_normalized_by_cost_perf"
    use_slos: ClassVar[bool] = False

    def __init__(self, prices: Mapping[GpuType, float] | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap)
        if p.n == 0 or p.k == 0:
            return Allocation()
        floors = slo_floors(p, snap.now) if self.use_slos else None
        cost = prices(p, self.prices)
        X, _ = solve_sum(p, cost=cost, min_throughput=floors)
        if not floors:  # Gavel's traces carry no SLOs: ECOS's point of the optimal face
            X = centre_of_sum(p, X, cost)
        return to_allocation(p, X)


@register
class MaxSumThroughputNormalizedByCostPerfSLOs(MaxSumThroughputNormalizedByCostPerf):
    """Cheapest throughput subject to every job meeting its SLO."""

    name: ClassVar[str] = "max_sum_throughput_normalized_by_cost_perf_SLOs"
    use_slos: ClassVar[bool] = True
