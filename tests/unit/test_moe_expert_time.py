"""The expert-time model (roofline with a floor) against the measured H200 points, and the
planner objective built on it (``plan_for_batch``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest

from lyra_ray.moe_serving.expert_time import (
    GPUS,
    H200,
    ExpertCost,
    expected_expert_times_s,
    expert_time_s,
    expert_times_s,
    flat_until,
)
from lyra_ray.moe_serving.planner import plan_for_batch, plan_lina, step_times

DATA = Path(__file__).resolve().parents[1] / "data" / "h200_moe_expert.json"
RAW = json.loads(DATA.read_text())
SHAPES = {name: (s["dim"], s["hidden"]) for name, s in RAW["provenance"]["shapes"].items()}
POINTS = [
    (name, *SHAPES[name], p["tokens"], p["s"])
    for name, pts in RAW["moe_expert_forward"].items()
    for p in pts
]


def test_the_copy_holds_both_shapes_and_their_provenance() -> None:
    assert len(SHAPES) == 2 and len(POINTS) == 26
    assert "2026-11-26" in RAW["provenance"]["measured"]
    assert "H200" in RAW["provenance"]["measured"]


@pytest.mark.parametrize(("name", "dim", "hidden", "tokens", "seconds"), POINTS)
def test_every_measured_point_within_15_percent(
    name: str, dim: int, hidden: int, tokens: int, seconds: float
) -> None:
    got = expert_time_s(dim, hidden, tokens)
    assert abs(got / seconds - 1.0) <= 0.15, f"{name} at {tokens} tokens: {got} vs {seconds}"


def test_constants_are_few_and_physical() -> None:
    numbers = [f.name for f in dataclasses.fields(H200) if isinstance(getattr(H200, f.name), float)]
    assert len(numbers) <= 5, numbers
    assert 1e12 < H200.bandwidth < 4.8e12  # below the H200's 4.8 TB/s peak
    assert 1e14 < H200.flops < 989e12  # below its dense bf16 peak
    assert 1e-6 < H200.floor_s < 1e-3
    assert "h200.json" in H200.source and "2026-11-26" in H200.source


@pytest.mark.parametrize("shape", [(4096, 14336), (1024, 4096), (7168, 2048), (2048, 1408)])
def test_monotone_in_tokens(shape: tuple[int, int]) -> None:
    tokens = np.concatenate(([0.0], np.geomspace(0.01, 1e6, 2000)))
    t = expert_times_s(*shape, tokens)
    assert t[0] == 0.0  # no tokens: not called
    assert np.all(np.diff(t) >= 0)
    assert np.all(t[1:] >= H200.floor_s)
    # and larger shapes never take less time
    assert np.all(expert_times_s(shape[0] * 2, shape[1], tokens) >= t)


def test_flat_then_linear() -> None:
    """The measured behaviour: flat up to a shape-dependent count, then ~linear."""
    assert 50 < flat_until(4096, 14336) < 256
    assert 512 < flat_until(1024, 4096) < 2048
    big = expert_time_s(4096, 14336, 16384) / expert_time_s(4096, 14336, 8192)
    assert big == pytest.approx(2.0, rel=0.05)


def test_unknown_gpu_names_itself_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"'a100'.*h200"):
        expert_time_s(4096, 14336, 10, gpu="a100")
    with pytest.raises(ValueError, match="a100"):
        ExpertCost(4096, 14336, "a100")
    assert set(GPUS) == {"h200"}
    with pytest.raises(ValueError):
        expert_time_s(4096, 14336, -1)


def test_expected_time_is_poisson_weighted() -> None:
    c = ExpertCost(7168, 2048)
    lam = np.array([0.0, 0.3, 2.0, 500.0])
    e = expected_expert_times_s(7168, 2048, lam)
    assert e[0] == 0.0
    assert e[1] == pytest.approx((1 - np.exp(-0.3)) * H200.floor_s, rel=1e-6)
    assert e[3] == pytest.approx(c.seconds(500.0), rel=1e-6)
    assert np.all(np.diff(c.expected(np.linspace(0, 200, 400))) >= -1e-15)


# ------------------------------------------------------------- the planner's objective


def _zipf(layers: int, experts: int, skew: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = (1.0 + np.arange(experts)) ** -skew
    return np.stack([rng.permutation(base) * 1e4 for _ in range(layers)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decode_batch_time_aware_plan_is_no_slower_than_token_balancing(seed: int) -> None:
    """A few tokens per expert: the time-aware plan's predicted step time <= Lina's."""
    load = _zipf(6, 64, 1.2, seed)
    cost = ExpertCost(7168, 2048)
    tokens = 4.0 * 64  # 4 routed tokens per expert on average
    lina = plan_lina(load, 80, 8, 10)
    tp = plan_for_batch(load, 80, 8, tokens, cost, slots=10)
    t_lina, t_tp = step_times(lina, tokens, cost), step_times(tp, tokens, cost)
    assert t_tp.sum() <= t_lina.sum() * (1 + 1e-12)
    assert t_tp.sum() < 0.95 * t_lina.sum(), "decode: replicating only adds calls"
    counts = tp.counts
    assert (counts >= 1).all() and counts.sum(1).max() <= 80
    assert np.bincount(tp.replica_device[0], minlength=8).max() <= 10


def test_prefill_batch_time_aware_plan_replicates_like_lina() -> None:
    load = _zipf(4, 64, 1.2, 3)
    cost = ExpertCost(7168, 2048)
    tokens = 8192.0 * 64  # thousands per expert: every expert compute-bound
    lina = plan_lina(load, 80, 8, 10)
    tp = plan_for_batch(load, 80, 8, tokens, cost, slots=10)
    t_lina, t_tp = step_times(lina, tokens, cost), step_times(tp, tokens, cost)
    assert t_tp.sum() <= t_lina.sum() * (1 + 1e-12)
    assert tp.counts.sum(1).min() > 64, "prefill: spare replicas pay"
    uniform = plan_lina(np.ones_like(load), 64, 8, 10)
    assert step_times(uniform, tokens, cost, load).sum() > 1.5 * t_tp.sum()


def test_plan_for_batch_refuses_a_bad_batch() -> None:
    with pytest.raises(ValueError, match="tokens_per_step"):
        plan_for_batch(_zipf(1, 8, 1.0, 0), 8, 2, 0.0, ExpertCost(64, 128))


# ------------------------------------------------------------- the lyra MoE service


def test_a_device_computes_unless_told_to_emulate() -> None:
    """The default call lasts as long as its computation; ``emulate`` (an expert shape)
    stretches it to the H200 model's time; ``service_ms`` to a constant on top."""
    from lyra_ray.moe_serving.experts import ExpertSlice
    from lyra_ray.serving.moe_device import (
        MoEDevice,
        call_seconds,
        device_service_ms,
        emulated_expert,
    )

    big = ExpertCost(4096, 14336)
    assert call_seconds(None, None, 16) == 0.0
    assert call_seconds(None, big, 2048) == pytest.approx(expert_time_s(4096, 14336, 2048))
    assert call_seconds(5.0, big, 16) == 0.005
    assert device_service_ms({}) is None and device_service_ms({"service_ms": 3}) == 3.0
    assert emulated_expert({}, 32, 64) is None
    assert emulated_expert({"emulate": 1}, 32, 64) == ExpertCost(32, 64)
    assert emulated_expert({"emulate": 1, "cost_dim": 4096, "cost_hidden": 14336}, 8, 8) == big

    cls = MoEDevice.func_or_class  # type: ignore[attr-defined]  # the plain class, no cluster
    rng = np.random.default_rng(0)
    w = ExpertSlice(
        rng.standard_normal((128, 32), dtype=np.float32),
        rng.standard_normal((32, 64), dtype=np.float32),
    )
    x = rng.standard_normal((16, 32), dtype=np.float32)

    async def go(service_ms: float | None, emulate: ExpertCost | None) -> float:
        dev = cls("n", 0, service_ms, None, emulate)
        dev.hosted[(0, 0)] = w
        t0 = time.perf_counter()
        for _ in range(5):
            await dev(0, 0, x, [None])
        return (time.perf_counter() - t0) / 5

    assert asyncio.run(go(None, None)) < 0.02
    assert asyncio.run(go(None, ExpertCost(4096, 14336))) >= 0.9 * big.seconds(16)
    assert asyncio.run(go(30.0, None)) >= 0.03


# ------------------------------------------------------------- the ideal ratios


def test_roofline_ideal_ratio_pays_only_past_the_flat_region() -> None:
    from lyra_ray.moe_serving.bottleneck import ideal_report, roofline_work

    cost = ExpertCost(4096, 14336)  # flat to ~100 tokens
    uniform = np.full((1, 4), 2, dtype=np.int64)
    lina = np.array([[4, 2, 1, 1]], dtype=np.int64)
    small = np.tile(np.array([[[60.0, 20.0, 12.0, 8.0]]]), (10, 1, 1))  # 10 requests
    r = ideal_report(small.sum(0), uniform, lina, 10, per_request=small, expert=cost)
    assert r["tokens"]["overall"] == pytest.approx(2.0)  # the token objective sees 2x
    assert r["roofline"]["window"]["overall"] < 1.05  # every call ~flat: ~no gain
    big = small * 100
    r = ideal_report(big.sum(0), uniform, lina, 10, per_request=big, expert=cost)
    assert r["roofline"]["window"]["overall"] > 1.5
    work = roofline_work(big, lina, cost)
    assert work[0, 0] == pytest.approx(10 * cost.seconds(1500.0))
