"""The live planner chooses by predicted step time for the batch regime the service sees.

What issue #46 asks of phase 1 and phase 2 (both plan through ``moe_plan.plan_devices``,
fed by the service's ``BatchHistogram``): with decode-sized steps its placement is
predicted no slower than uniform's; with prefill-sized steps it keeps >= 90 % of the
token-balance plan's predicted gain over uniform; near the knee it is no slower than the
better of the two; a mixed histogram is served by one plan that is no slower than either
under that mixture. On DeepSeek-V3's measured loads (``../shared/data/moe``) and on Zipf
loads, for DeepSeek-V3's expert and the Mixtral-sized one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from lyra_ray.moe_serving.batch_regime import BatchHistogram, check_regime, parse_regime
from lyra_ray.moe_serving.expert_time import ExpertCost, flat_until, host_roofline, per_call
from lyra_ray.moe_serving.planner import (
    Placement,
    plan_lina,
    plan_uniform,
    regime_step_times,
)
from lyra_ray.serving.moe_plan import plan_devices

DATA = Path(
    os.environ.get(
        "LYRA_SHARED_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    )
)
DEEPSEEK = sorted((DATA / "moe").glob("deepseek_v3_expert_load_*.json"))
DS_EXPERT, MIXTRAL_EXPERT = ExpertCost(7168, 2048), ExpertCost(4096, 14336)


def _zipf(layers: int, experts: int, skew: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = (1.0 + np.arange(experts)) ** -skew
    return np.stack([rng.permutation(base) * rng.uniform(1e3, 1e5) for _ in range(layers)])


def _t(plan: Placement, regime: tuple[tuple[float, float], ...], cost: ExpertCost, load) -> float:
    return float(regime_step_times(plan, regime, cost, load).sum())


def _baselines(load: np.ndarray, devices: int, slots: int) -> dict[str, Placement]:
    layers, experts = load.shape
    out = {
        "uniform": plan_devices(np.ones_like(load), devices, slots),  # the service's baseline
        "token balance": plan_lina(load, devices * slots, devices, slots),
    }
    if -(-experts // devices) <= slots:
        out["uniform, one each"] = plan_uniform(experts, layers, experts, devices, slots)
    return out


def _check(load: np.ndarray, devices: int, slots: int, tokens: float, cost: ExpertCost) -> dict:
    regime = ((tokens, 1.0),)
    plan = plan_devices(load, devices, slots, regime, cost)
    base = _baselines(load, devices, slots)
    times = {k: _t(p, regime, cost, load) for k, p in base.items()}
    return {"plan": _t(plan, regime, cost, load), **times, "replicas": plan.counts.sum(1)}


CASES = [  # (experts, devices, slots, top-k)
    (8, 4, 3, 2),
    (16, 4, 6, 2),
    (64, 8, 10, 4),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("cost", [DS_EXPERT, MIXTRAL_EXPERT])
def test_decode_steps_are_never_slower_than_uniform(seed: int, shape, cost) -> None:
    experts, devices, slots, _k = shape
    load = _zipf(4, experts, 1.2, seed)
    for per_expert in (0.5, 4.0):  # decode: a few routed tokens per expert and step
        r = _check(load, devices, slots, per_expert * experts, cost)
        assert r["plan"] <= r["uniform"] * (1 + 1e-9), r
        if "uniform, one each" in r:
            assert r["plan"] <= r["uniform, one each"] * (1 + 1e-9), r
        assert r["plan"] <= r["token balance"] * (1 + 1e-9), r


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("cost", [DS_EXPERT, MIXTRAL_EXPERT])
def test_prefill_steps_keep_the_token_balance_gain(seed: int, shape, cost) -> None:
    experts, devices, slots, _k = shape
    load = _zipf(4, experts, 1.2, seed)
    for per_expert in (2048.0, 8192.0):
        r = _check(load, devices, slots, per_expert * experts, cost)
        gain, balance_gain = r["uniform"] / r["plan"], r["uniform"] / r["token balance"]
        assert balance_gain > 1.05, r  # popularity pays in prefill: there is a gain to keep
        assert gain >= 0.9 * balance_gain, r


@pytest.mark.parametrize("cost", [DS_EXPERT, MIXTRAL_EXPERT])
def test_near_the_knee_no_slower_than_the_better_baseline(cost: ExpertCost) -> None:
    knee = flat_until(cost.dim, cost.hidden)
    load = _zipf(4, 16, 1.2, 3)
    for per_expert in (0.25 * knee, 0.5 * knee, knee, 2 * knee):
        r = _check(load, 4, 6, per_expert * 16, cost)
        assert r["plan"] <= min(r["uniform"], r["token balance"]) * (1 + 1e-9), (per_expert, r)


def test_a_mixed_histogram_gets_one_plan_no_slower_under_the_mixture() -> None:
    """Not a threshold: each mixture of decode and prefill steps gets the plan for that
    mixture, no slower than either baseline under it, and the plan moves with the mix."""
    load, cost = _zipf(4, 16, 1.2, 5), MIXTRAL_EXPERT
    totals = []
    for w in (0.0, 0.05, 0.3, 1.0):
        regime = check_regime([(4.0 * 16, 1.0 - w), (4096.0 * 16, w)])
        plan = plan_devices(load, 4, 6, regime, cost)
        base = _baselines(load, 4, 6)
        t = _t(plan, regime, cost, load)
        for name, b in base.items():
            assert t <= _t(b, regime, cost, load) * (1 + 1e-9), (w, name)
        totals.append(int(plan.counts.sum()))
    assert totals[0] < totals[-1], totals  # decode keeps few replicas, prefill uses the budget


@pytest.mark.data
@pytest.mark.skipif(not DEEPSEEK, reason="../shared/data/moe not present")
def test_deepseek_v3_loads_decode_and_prefill() -> None:
    """The acceptance on the real loads: 256 experts, 32 GPUs x 9 slots, DeepSeek-V3's
    expert; decode at 4 routed tokens per expert, prefill at 1,024."""
    for f in DEEPSEEK[:1] + DEEPSEEK[2:3]:
        raw = np.asarray(json.loads(f.read_text())["logical_count"], dtype=np.float64)
        load = raw[raw.sum(1) > 0][::6]  # every 6th MoE layer: 10 layers, same spread
        dec = _check(load, 32, 9, 4.0 * 256, DS_EXPERT)
        one = dec["uniform, one each"]
        assert dec["plan"] <= min(dec["uniform"], one) * (1 + 1e-9), (f.name, dec)
        assert dec["token balance"] > one, dec  # why it matters: balance loses in decode
        pre = _check(load, 32, 9, 1024.0 * 256, DS_EXPERT)
        gain, balance = pre["uniform"] / pre["plan"], pre["uniform"] / pre["token balance"]
        assert balance > 1.2 and gain >= 0.9 * balance, (f.name, pre)


def test_a_constant_per_call_cost_never_replicates() -> None:
    """``service_ms``: every call costs the same whatever its tokens; an extra replica only
    adds calls, so each expert keeps one."""
    load = _zipf(2, 4, 1.5, 0)
    cost = ExpertCost(32, 64, constants=per_call(0.002))
    plan = plan_devices(load, 4, 3, ((64.0, 1.0),), cost)
    assert (plan.counts == 1).all(), plan.counts


def test_a_measured_host_cost_is_flat_then_linear() -> None:
    roof = host_roofline(64, 256, 20e-6, 256, 2e-3, "test")
    cost = ExpertCost(64, 256, gpu="host", constants=roof)
    assert cost.seconds(1) == pytest.approx(20e-6)
    assert cost.seconds(256) == pytest.approx(2e-3)
    assert cost.seconds(512) == pytest.approx(4e-3)
    with pytest.raises(ValueError, match="host timings"):
        host_roofline(64, 256, 0.0, 256, 1e-3, "bad")


# ------------------------------------------------------------------ the batch histogram


def test_the_histogram_follows_what_the_service_sees() -> None:
    h = BatchHistogram(prior=128.0, half_life=50.0)
    assert h.regime() == ((128.0, 1.0),)
    for _ in range(90):
        h.observe(64.0)
    for _ in range(10):
        h.observe(8192.0)
    sizes = dict(h.regime())
    assert set(sizes) == {64.0, 8192.0} and sizes[64.0] > sizes[8192.0] > 0.05, sizes
    for _ in range(500):  # the mix moves to prefill: the old sizes fade
        h.observe(8000.0)
    sizes = dict(h.regime())
    assert max(sizes, key=lambda t: sizes[t]) > 4096 and sum(sizes.values()) == pytest.approx(1)
    h.observe(0.0)  # an empty step routes nothing: ignored
    h.observe(float("nan"))
    assert sum(dict(h.regime()).values()) == pytest.approx(1)


def test_a_regime_refuses_bad_input_naming_it() -> None:
    assert parse_regime("64") == ((64.0, 1.0),)
    assert parse_regime("64:3,8192:1") == ((64.0, 0.75), (8192.0, 0.25))
    for bad, match in [
        ("", "not TOKENS"),
        ("x", "not TOKENS"),
        ("0", "> 0"),
        ("inf", "> 0"),
        ("64:-1", ">= 0"),
        ("64:0", "all 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_regime(bad, "--batch-tokens")
    with pytest.raises(ValueError, match="prior"):
        BatchHistogram(prior=0.0)
