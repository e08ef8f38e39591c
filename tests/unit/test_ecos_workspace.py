"""ECOS set up once per LP structure answers, to the bit, as ``csolve`` set up afresh.

Every simulated JCT under the LAS policies depends on ECOS's exact point, so the kept
workspaces (:mod:`lyra_ray.policies.gavel.ecos_workspace`) must return the same x, z and
exit flag as the per-call setup, over many problems of one structure, in any order, and
fall back to ``csolve`` where the library does not look like the one they were written for.
"""

from __future__ import annotations

import numpy as np
import pytest
from _ecos import csolve

from lyra_ray.policies.gavel import ecos_las, ecos_workspace
from lyra_ray.policies.gavel.ecos_workspace import LayoutMismatch, Workspace
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem
from lyra_ray.policies.gavel.max_min_fairness import las_coefficients
from tests.gavel_builders import random_snapshot

pytestmark = pytest.mark.skipif(
    not ecos_workspace.available(), reason="this ECOS build exports no workspace API"
)


def _las_lp(seed: int, n: int, runnable: np.ndarray | None = None) -> tuple:
    """One LAS LP in the CSC form ``solve_las_ecos`` hands ECOS (numbers vary by seed)."""
    rng = np.random.default_rng(seed)
    k = 3
    run = runnable if runnable is not None else rng.random((n, k)) > 0.25
    coef = rng.random((n, k)) * 5.0 * run
    sf = rng.choice([1.0, 2.0, 4.0, 8.0], size=n)
    cap = rng.integers(8, 40, size=k).astype(np.float64)
    key = (run.shape, np.packbits(run).tobytes())
    shape = ecos_las._structure(run, key)
    assert shape is not None
    keep, job, active, ones_data, rows, indptr, h_head, c = shape
    data = ones_data.copy()
    data[:, 0] = -coef.ravel()[keep]
    data[:, 3] = sf[job]
    values = np.concatenate([data.ravel(), np.ones(active.size)])
    h = np.concatenate([h_head, cap])
    return c, values, rows, indptr, 2 * active.size + keep.size + k, h


def _csolve(c, values, rows, indptr, nrow, h) -> tuple[int, np.ndarray, np.ndarray]:
    dims = {"l": nrow, "q": [], "e": 0}
    sol = csolve((nrow, c.shape[0], 0), c, values, rows, indptr, h, dims, verbose=False)
    return int(sol["info"]["exitFlag"]), sol["x"], sol["z"]


def _bits(a: tuple[int, np.ndarray, np.ndarray], b: tuple[int, np.ndarray, np.ndarray]) -> bool:
    return a[0] == b[0] and a[1].tobytes() == b[1].tobytes() and a[2].tobytes() == b[2].tobytes()


@pytest.mark.parametrize("n", [1, 7, 40, 150])
def test_a_kept_workspace_answers_every_problem_of_its_structure_as_csolve(n: int) -> None:
    run = np.random.default_rng(n).random((n, 3)) > 0.25
    run[:, 0] = True  # every job runnable somewhere: one structure for all seeds
    c, values, rows, indptr, nrow, h = _las_lp(0, n, run)
    ws = Workspace(c, (values, rows, indptr), nrow, h)
    try:
        assert _bits(ws.solve(), _csolve(c, values, rows, indptr, nrow, h))
        with pytest.raises(RuntimeError, match="resolve"):
            ws.solve()
        for seed in (1, 2, 3, 1, 0):  # new numbers, and numbers seen before
            c, values, rows, indptr, nrow, h = _las_lp(seed, n, run)
            assert _bits(ws.resolve(c, values, h), _csolve(c, values, rows, indptr, nrow, h))
    finally:
        ws.close()
    with pytest.raises(RuntimeError, match="closed"):
        ws.resolve(c, values, h)


def test_an_infeasible_lp_reports_csolves_flag_and_the_next_solve_is_clean() -> None:
    # x <= -1 and -x <= -1 (x >= 1): infeasible; then x <= 2, -x <= 0 with min -x: x = 2.
    c = np.array([-1.0])
    rows, indptr = np.array([0, 1], dtype=np.int64), np.array([0, 2], dtype=np.int64)
    bad_v, bad_h = np.array([1.0, -1.0]), np.array([-1.0, -1.0])
    good_h = np.array([2.0, 0.0])
    ws = Workspace(c, (bad_v, rows, indptr), 2, bad_h)
    try:
        got = ws.solve()
        assert got[0] not in (0, 10)
        assert got[0] == _csolve(c, bad_v, rows, indptr, 2, bad_h)[0]
        assert _bits(ws.resolve(c, bad_v, good_h), _csolve(c, bad_v, rows, indptr, 2, good_h))
    finally:
        ws.close()


def test_policy_solves_are_the_same_with_and_without_kept_workspaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problems = [build_problem(random_snapshot(n, seed=s)) for n in (5, 30, 30, 5) for s in (1, 2)]
    ecos_las._close_workspaces()
    kept = [
        ecos_las.solve_las_ecos(las_coefficients(p, False), p.sf, p.capacity, p.runnable)
        for p in problems
    ]
    assert ecos_las._WORKSPACES  # the repeated structures were kept
    monkeypatch.setitem(ecos_las._KEPT, "usable", False)
    fresh = [
        ecos_las.solve_las_ecos(las_coefficients(p, False), p.sf, p.capacity, p.runnable)
        for p in problems
    ]
    for a, b in zip(kept, fresh, strict=True):
        assert a[0].tobytes() == b[0].tobytes() and a[1] == b[1]
        assert a[2].tobytes() == b[2].tobytes()


def test_a_library_that_does_not_match_the_known_layout_falls_back_to_csolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p, coef, expect = _csolve_answer(monkeypatch, 20, seed=4)
    # ECOS's defaults as another layout would show them: the check refuses the workspace.
    monkeypatch.setattr(ecos_workspace, "_DEFAULTS", ((ecos_workspace._FEASTOL, 0.5),))
    c, values, rows, indptr, nrow, h = _las_lp(0, 4)
    with pytest.raises(LayoutMismatch):
        Workspace(c, (values, rows, indptr), nrow, h)
    got = ecos_las.solve_las_ecos(coef, p.sf, p.capacity, p.runnable)
    assert ecos_las._KEPT["usable"] is False and not ecos_las._WORKSPACES
    assert got[0].tobytes() == expect[0].tobytes() and got[1] == expect[1]


def test_ecos_points_are_the_same_with_and_without_kept_workspaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lyra_ray.policies.gavel.ecos_centre import ecos_point, feasible_point

    rng = np.random.default_rng(11)
    cases = []
    for _ in range(6):  # two shapes, three problems each: the second and third reuse
        for n in (4, 9):
            T = rng.random((n, 3)) * (rng.random((n, 3)) > 0.2)
            sf = rng.choice([1.0, 2.0, 4.0], size=n)
            cap = rng.integers(4, 12, size=3).astype(np.float64)
            cases.append((rng.random(n * 3) - 0.5, T, sf, cap, rng.random(n) * 0.1))

    def run() -> list[np.ndarray | None]:
        out = []
        for cost, T, sf, cap, need in cases:
            out.append(ecos_point(cost, T, sf, cap))
            out.append(feasible_point(T, sf, cap, need))
        return out

    ecos_las._close_workspaces()
    kept = run()
    assert any(isinstance(k, tuple) and k[0] == "centre" for k in ecos_las._WORKSPACES)
    monkeypatch.setitem(ecos_las._KEPT, "usable", False)
    fresh = run()
    for a, b in zip(kept, fresh, strict=True):
        assert (a is None and b is None) or (
            a is not None and b is not None and a.tobytes() == b.tobytes()
        )


def test_workspaces_are_bounded_and_the_least_recently_used_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ecos_las, "_MAX_WORKSPACES", 2)
    ecos_las._close_workspaces()
    problems = {n: build_problem(random_snapshot(n, seed=1)) for n in (3, 4, 5)}

    def solve(n: int) -> None:
        p = problems[n]
        ecos_las.solve_las_ecos(las_coefficients(p, False), p.sf, p.capacity, p.runnable)

    def sizes() -> list[int]:
        return [int(key[0][0]) for key in ecos_las._WORKSPACES]  # runnable's shape

    solve(3), solve(4), solve(3)  # 3 is now the most recent
    assert sizes() == [4, 3]
    evicted = ecos_las._WORKSPACES[next(iter(ecos_las._WORKSPACES))]
    solve(5)
    assert sizes() == [3, 5]
    with pytest.raises(RuntimeError, match="closed"):  # its ECOS memory was freed
        evicted.resolve(np.zeros(1), np.zeros(1), np.zeros(1))
    ecos_las._close_workspaces()


def test_a_problem_ecos_refuses_to_set_up_goes_to_csolve_and_keeps_workspaces_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p, coef, expect = _csolve_answer(monkeypatch, 6, seed=7)

    def refused(self: Workspace, *args: object) -> None:
        raise ecos_workspace.SetupFailed("ECOS_setup returned NULL")

    monkeypatch.setattr(Workspace, "__init__", refused)
    got = ecos_las.solve_las_ecos(coef, p.sf, p.capacity, p.runnable)
    assert got[0].tobytes() == expect[0].tobytes() and got[1] == expect[1]
    assert ecos_las._KEPT["usable"] is True and not ecos_las._WORKSPACES


def _csolve_answer(
    monkeypatch: pytest.MonkeyPatch, jobs: int, seed: int
) -> tuple[Problem, FloatArray, tuple[FloatArray, float, FloatArray]]:
    """A random LAS problem, its coefficients and csolve's answer to it; workspaces are
    back on (none kept) when it returns, for the test to break them its own way."""
    p = build_problem(random_snapshot(jobs, seed=seed))
    coef = las_coefficients(p, False)
    monkeypatch.setitem(ecos_las._KEPT, "usable", False)
    expect = ecos_las.solve_las_ecos(coef, p.sf, p.capacity, p.runnable)
    monkeypatch.setitem(ecos_las._KEPT, "usable", True)
    ecos_las._close_workspaces()
    return p, coef, expect
