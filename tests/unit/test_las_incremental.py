"""The live LAS model answers every LP of a changing job set at the cold solve's level.

The warm-started model (:mod:`lyra_ray.policies.gavel.las_incremental`) returns an optimal vertex,
not the cold interior point, so allocations are compared by what LAS optimises: the
max-min level (to 1e-6, like the cvxpy checks) and feasibility.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.model import ClusterSnapshot
from lyra_ray.policies.gavel import lp
from lyra_ray.policies.gavel import reference_cvxpy as ref
from lyra_ray.policies.gavel.inputs import build_problem
from lyra_ray.policies.gavel.las_incremental import IncrementalLas
from lyra_ray.policies.gavel.max_min_fairness import (
    WARM,
    MaxMinFairnessPerf,
    las_coefficients,
    solve_las,
)
from tests.gavel_builders import random_snapshot


def _close(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _check(
    X: np.ndarray, coef: np.ndarray, sf: np.ndarray, cap: np.ndarray, ub: np.ndarray
) -> None:
    assert (X >= 0).all() and (ub >= X).all()
    assert (X.sum(axis=1) <= 1 + 1e-7).all()
    assert (sf @ X <= cap + 1e-6).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(0, 3), min_size=2, max_size=12))
def test_a_changing_job_set_keeps_the_cold_level(seed: int, steps: list[int]) -> None:
    """Jobs arrive and leave between solves; every solve matches a cold solve's level."""
    rng = np.random.default_rng(seed)
    k = 3
    cap = rng.integers(1, 9, size=k).astype(np.float64)
    pool = {
        f"j{i}": (
            rng.choice([0.0, 0.3, 1.0, 2.5], size=k) * rng.uniform(0.5, 2.0),
            float(rng.choice([1, 1, 2, 4])),
        )
        for i in range(30)
    }
    live = IncrementalLas(k, slots=4)  # small, so that the model also has to grow
    ids: list[str] = []
    for step in steps:
        out = [j for j in ids if rng.random() < 0.3]
        ids = [j for j in ids if j not in out]
        ids += [j for j in pool if j not in ids][: step + (0 if ids else 1)]
        rng.shuffle(ids)
        coef = np.array([pool[j][0] for j in ids])
        sf = np.array([pool[j][1] for j in ids])
        ub = ((coef > 0) & (sf[:, None] <= cap[None, :])).astype(np.float64)
        coef = coef * ub
        active = ub.any(axis=1)
        if not active.any():
            continue
        X, t = live.solve(ids, coef, sf, cap, ub, active)
        cold = lp.max_min_jobs(coef, sf, cap, ub.ravel(), active, method="ipm")
        _check(X, coef, sf, cap, ub)
        assert _close(t, cold.level)
        assert _close(float((coef * X).sum(axis=1)[active].min()), cold.level)


@pytest.mark.parametrize("seed", range(4))
def test_the_perf_policy_on_its_live_model_reaches_the_cvxpy_level(seed: int) -> None:
    policy = MaxMinFairnessPerf(method=WARM)
    for n in (9, 14, 6, 14):  # shrinking and growing job sets on one model
        snap: ClusterSnapshot = random_snapshot(n + seed, seed=seed * 7 + n)
        p = build_problem(snap)
        alloc = policy.allocate(snap)
        X = np.array([[alloc.fractions[j.id][g] for g in p.gpu_types] for j in p.jobs])
        coef = las_coefficients(p, agnostic=False)
        active = p.runnable.any(axis=1)
        level = ref.las_level(p, coef)
        assert _close(float((coef * X).sum(axis=1)[active].min()), level, 1e-5)
        _, cold = solve_las(p, agnostic=False)
        assert _close(cold, level)
