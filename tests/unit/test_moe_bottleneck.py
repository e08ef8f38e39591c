"""The ideal bottleneck ratio the serving benchmark reports beside its measured ratios."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from lyra_ray.moe_serving.bottleneck import (
    ideal_ratio,
    ideal_report,
    replica_work,
    request_ideal,
    request_times,
)


def test_tokens_ratio_is_busiest_replica_over_busiest_replica() -> None:
    tokens = np.array([[600.0, 200.0, 120.0, 80.0]])
    uniform = np.full((1, 4), 2, dtype=np.int64)
    lina = np.array([[4, 2, 1, 1]], dtype=np.int64)
    r = ideal_ratio(tokens, uniform, lina)
    assert r["busiest_base"] == [300.0] and r["busiest_plan"] == [150.0]
    assert r["overall"] == pytest.approx(2.0)


def test_fixed_per_call_cost_dilutes_the_gain() -> None:
    """Every request calls every replica once: the fixed cost is the same under both plans."""
    tokens = np.array([[600.0, 200.0, 120.0, 80.0]])
    uniform = np.full((1, 4), 2, dtype=np.int64)
    lina = np.array([[4, 2, 1, 1]], dtype=np.int64)
    svc = ideal_ratio(tokens, uniform, lina, requests=10, fixed_s=1.0, per_token_s=0.1)
    assert svc["overall"] == pytest.approx((10 + 30.0) / (10 + 15.0))
    assert 1.0 < svc["overall"] < ideal_ratio(tokens, uniform, lina)["overall"]


def test_overall_takes_the_busiest_layer_and_idle_experts_cost_nothing() -> None:
    tokens = np.array([[10.0, 0.0], [4.0, 4.0]])
    work = replica_work(tokens, np.ones((2, 2), dtype=np.int64), requests=3, fixed_s=1.0)
    np.testing.assert_allclose(work, [[13.0, 0.0], [7.0, 7.0]])
    r = ideal_report(tokens, np.ones((2, 2), dtype=np.int64), np.array([[2, 1], [1, 1]]), 3)
    assert r["tokens"]["per_layer"] == [2.0, 1.0]
    assert r["tokens"]["overall"] == pytest.approx(10.0 / 5.0)
    assert "service" not in r
    with pytest.raises(ValueError):
        replica_work(tokens, np.zeros((2, 2), dtype=np.int64))


def test_request_time_is_the_slowest_chunk_per_layer_summed_over_layers() -> None:
    per_request = np.array([[[5.0, 1.0], [0.0, 3.0]]])  # one request, 2 layers, 2 experts
    t = request_times(per_request, np.array([[2, 1], [1, 1]]), fixed_s=1.0, per_token_s=1.0)
    np.testing.assert_allclose(t, [(1 + 3) + (1 + 3)])  # ceil(5/2) = 3; layer 1: 3 tokens


def test_a_request_on_a_cold_expert_sets_lina_s_tail() -> None:
    """Most requests favour the hot expert; one favours an expert Lina gave one replica."""
    hot = np.array([[[8.0, 2.0, 1.0, 1.0]]])
    cold = np.array([[[1.0, 1.0, 1.0, 9.0]]])
    per_request = np.concatenate([hot] * 19 + [cold])
    uniform = np.full((1, 4), 2, dtype=np.int64)
    lina = np.array([[4, 2, 1, 1]], dtype=np.int64)
    r = request_ideal(per_request, uniform, lina)
    assert r["p50"] == pytest.approx(2.0)
    assert r["p95"] < r["p50"]


def test_pure_moe_modules_do_not_import_ray() -> None:
    code = (
        "import sys, lyra_ray.moe_serving.bottleneck, lyra_ray.moe_serving.model; "
        "sys.exit(1 if 'ray' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
