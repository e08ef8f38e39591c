"""The live MoE service's phase-2 gate: re-plan on a persistent drift, not on noise."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.moe_serving.planner import plan_lina
from lyra_ray.serving.moe_drift import DriftGate, replica_imbalance
from lyra_ray.serving.moe_request import check_topics

BUDGET, DEVICES, SLOTS = 12, 4, 3
OLD = np.array([[60.0, 20.0, 12.0, 8.0], [55.0, 25.0, 12.0, 8.0]])
NEW = OLD[:, ::-1].copy()  # the popular experts are now the other end


def _plan(load: np.ndarray) -> object:
    return plan_lina(load, BUDGET, DEVICES, SLOTS)


def _noisy(load: np.ndarray, rng: np.random.Generator, tokens: int = 4000) -> np.ndarray:
    out = np.stack([rng.multinomial(tokens, row / row.sum()) for row in load])
    return out.astype(np.float64)


def test_noise_around_the_planned_mix_never_replans() -> None:
    rng = np.random.default_rng(0)
    plan = _plan(OLD)
    gate = DriftGate(threshold=0.2, min_gain=0.1, checks=2)
    for _ in range(200):
        check, new = gate.check(plan, _noisy(OLD, rng, tokens=400))
        assert new is None and not check.replan, check


def test_a_shift_replans_at_the_kth_check_and_evens_the_replicas() -> None:
    rng = np.random.default_rng(1)
    plan = _plan(OLD)
    gate = DriftGate(threshold=0.2, min_gain=0.1, checks=3)
    first, new = gate.check(plan, _noisy(NEW, rng))
    assert new is None and first.streak == 1 and first.imbalance > 2.0, first
    second, new = gate.check(plan, _noisy(NEW, rng))
    assert new is None and second.streak == 2, second
    third, new = gate.check(plan, _noisy(NEW, rng))
    assert new is not None and third.replan and third.streak == 0, third
    assert third.gain > 0.1 and third.layers == (0, 1), third
    window = _noisy(NEW, rng)
    assert replica_imbalance(window, new) <= max(1.3, gate.check(new, window)[0].best + 0.05)


def test_a_burst_that_ends_resets_the_streak() -> None:
    rng = np.random.default_rng(2)
    plan = _plan(OLD)
    gate = DriftGate(threshold=0.2, min_gain=0.1, checks=2)
    assert gate.check(plan, _noisy(NEW, rng))[0].streak == 1
    assert gate.check(plan, _noisy(OLD, rng))[0].streak == 0
    check, new = gate.check(plan, _noisy(NEW, rng))
    assert new is None and check.streak == 1, check


def test_a_drift_that_gains_too_little_is_left_alone() -> None:
    plan = _plan(OLD)
    gate = DriftGate(threshold=0.0, min_gain=9.0, checks=1)
    check, new = gate.check(plan, NEW)
    assert new is None and 0 < check.gain < 9.0, check


def test_bad_gate_settings_and_topic_mixes_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="checks"):
        DriftGate(0.2, 0.1, 0)
    with pytest.raises(ValueError, match="min_gain"):
        DriftGate(0.2, -1.0, 1)
    assert check_topics([1, 0, 0, 1], 4).tolist() == [0.5, 0, 0, 0.5]
    for bad in ([1, 2], [0, 0, 0, 0], [1, -1, 1, 1], ["a", 1, 1, 1], [float("nan"), 1, 1, 1], 3):
        with pytest.raises(ValueError, match="'topics'"):
            check_topics(bad, 4)
