"""ECOS's points of Gavel's LPs: feasible, optimal where asked, and central, not a vertex."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.policies.gavel.ecos_centre import ecos_point, feasible_point, gavel_makespan
from lyra_ray.policies.gavel.inputs import build_problem
from lyra_ray.policies.gavel.max_sum_throughput import solve_sum
from lyra_ray.policies.gavel.min_total_duration import solve_makespan
from tests.gavel_builders import random_snapshot


def _feasible(X: np.ndarray, sf: np.ndarray, cap: np.ndarray) -> None:
    assert (X >= -1e-7).all()
    assert (X.sum(axis=1) <= 1 + 1e-6).all()
    assert ((sf[:, None] * X).sum(axis=0) <= cap + 1e-6).all()


def test_gavels_makespan_bisection_lands_within_five_percent_of_the_optimum() -> None:
    p = build_problem(random_snapshot(16, seed=3))
    r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs])
    T = p.T * p.runnable
    X = gavel_makespan(T, p.sf, p.capacity, r)
    _feasible(X, p.sf, p.capacity)
    _, best = solve_makespan(p)
    makespan = float(np.max(r / np.maximum((T * X).sum(axis=1), 1e-300)))
    assert best - 1e-6 <= makespan <= 1.06 * best


def test_a_constant_objective_gives_an_interior_point() -> None:
    # two identical jobs, one GPU of each of two types: every split is feasible, and the
    # centre uses both types for both jobs (a vertex would put each job on one type)
    T = np.ones((2, 2))
    X = feasible_point(T, np.ones(2), np.array([1.0, 1.0]), np.array([0.1, 0.1]))
    assert X is not None
    assert (X > 0.05).all()


def test_an_lp_objective_gives_the_optimum() -> None:
    p = build_problem(random_snapshot(12, seed=5))
    T = p.T * p.runnable
    X = ecos_point(-T.ravel(), T, p.sf, p.capacity)
    assert X is not None
    _feasible(X, p.sf, p.capacity)
    _, best = solve_sum(p)
    assert float((T * X).sum()) == pytest.approx(best, rel=1e-6)
