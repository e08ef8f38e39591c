"""Minimise makespan: Gavel's ``min_total_duration[_perf]`` as a single LP.

Gavel bisects over the makespan M with a feasibility problem per step. With
``theta = 1 / M`` the constraint ``r_m / throughput(m, X) <= M`` becomes
``throughput(m, X) >= theta r_m``, linear in (X, theta): one max-min LP.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot
from policies.base import register
from policies.gavel.inputs import FloatArray, Problem, build_problem, to_allocation
from policies.gavel.lp import base_constraints, max_min, utility_matrix


def solve_makespan(p: Problem) -> tuple[FloatArray, float]:
    """Returns (X, makespan in seconds) over the jobs that can run."""
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs]).reshape(p.n)
    active: NDArray[np.bool_] = np.asarray(p.runnable.any(axis=1))
    if not active.any():
        return np.zeros((p.n, p.k)), 0.0
    A, b = base_constraints(p.sf, p.capacity)
    ub = p.runnable.astype(np.float64).ravel()
    coef = (p.T * p.runnable) / r[:, None]
    res = max_min(utility_matrix(coef), A, b, ub, active=active, floor=np.zeros(p.n))
    theta = res.level
    return res.x.reshape(p.n, p.k), (1.0 / theta if theta > 0 else float("inf"))


@register
class MinTotalDurationPerf:
    """Heterogeneity-aware makespan minimisation (Gavel: ``min_total_duration_perf``)."""

    name: ClassVar[str] = "min_total_duration_perf"
    agnostic: ClassVar[bool] = False

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        p = build_problem(snap, agnostic=self.agnostic)
        if p.n == 0 or p.k == 0:
            return Allocation()
        X, _ = solve_makespan(p)
        return to_allocation(p, X)


@register
class MinTotalDuration(MinTotalDurationPerf):
    """Agnostic variant (Gavel: ``min_total_duration``)."""

    name: ClassVar[str] = "min_total_duration"
    shuffle_round_types: ClassVar[bool] = True
    """Gavel shuffles GPU types each round for policies without "Perf" in the name."""
    agnostic: ClassVar[bool] = True
