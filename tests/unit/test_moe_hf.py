"""The served MoE architecture: ``transformers``' own classes, random weights, in-process.

- each MoE layer's routed experts, run slice by slice as the devices run them, give what
  the model's own fused experts module gives (Mixtral, Qwen2-MoE, DeepSeek-V3, and a
  user-named Qwen3-MoE from its config alone);
- the routers' bias is calibrated to a target popularity per layer (Zipf, or DeepSeek-V3's
  measured loads mapped onto the small model's experts);
- the ingress, run without a cluster (its devices the plain class, in-process), returns
  the model's own forward to float precision, with and without borrowing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from lyra_ray.moe_serving.hf_arch import ArchSpec, arch_spec  # noqa: E402
from lyra_ray.moe_serving.hf_moe import HFMoE  # noqa: E402
from lyra_ray.moe_serving.popularity_map import (  # noqa: E402
    cap_shares,
    mapped_shares,
    zipf_shares,
)

SMALL = {
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2},
    "deepseek_v3": {"n_routed_experts": 4, "num_experts_per_tok": 2},
}
DATA = Path(
    os.environ.get(
        "LYRA_SHARED_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    )
)
DECODE = DATA / "moe" / "deepseek_v3_expert_load_decode_in1000out1000.json"


@pytest.fixture(scope="module")
def models() -> dict[str, HFMoE]:
    torch.set_num_threads(1)
    return {a: HFMoE(ArchSpec(a, c)) for a, c in SMALL.items()}


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_slices_compute_what_the_fused_experts_module_computes(models, arch: str) -> None:
    m = models[arch]
    assert m.layers == 2 and m.experts == 4 and m.top_k == 2
    tokens = m.profile_tokens()[:8]

    def fused(layer: int, hidden: Any, idx: Any, w: Any) -> Any:
        return m.experts_modules[layer](hidden, idx, w)  # transformers' own forward

    ours, routes = m.run(tokens)
    theirs, routes2 = m.run(tokens, fused)
    assert torch.equal(routes, routes2) and routes.shape == (2, tokens.size, 2)
    assert float((ours - theirs).abs().max()) < 1e-5


def test_a_user_names_their_own_architecture_and_config() -> None:
    cfg = {
        "vocab_size": 128,
        "hidden_size": 32,
        "intermediate_size": 64,
        "moe_intermediate_size": 48,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "num_experts": 6,
        "num_experts_per_tok": 2,
    }
    m = HFMoE(ArchSpec("qwen3_moe", cfg, seed=3))
    assert (type(m.model).__name__, m.layers, m.experts, m.dim, m.inter) == (
        "Qwen3MoeForCausalLM",
        3,
        6,
        32,
        48,
    )
    s = m.expert_slice(1, 5)
    assert s.gate_up.shape == (96, 32) and s.down.shape == (32, 48)
    with pytest.raises(ValueError, match="arch: 'llama' has no MoE block"):
        HFMoE(ArchSpec("llama", {"num_hidden_layers": 1, "hidden_size": 32}))
    with pytest.raises(ValueError, match="arch: 'no-such-model'"):
        HFMoE(ArchSpec("no-such-model"))
    with pytest.raises(ValueError, match="hidden_act"):
        HFMoE(ArchSpec("mixtral", {"hidden_act": "gelu"}))


def test_the_service_knobs_name_the_config_fields() -> None:
    spec = arch_spec({"arch": "deepseek_v3", "layers": 3, "experts": 8, "top_k": 2, "dim": 32})
    assert spec.config == {
        "num_hidden_layers": 3,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "hidden_size": 32,
    }
    spec = arch_spec({"experts": 8, "hf_config": {"num_local_experts": 6}})
    assert spec.arch == "mixtral" and spec.config["num_local_experts"] == 6  # hf_config wins


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_routers_are_calibrated_to_the_target_popularity(models, arch: str) -> None:
    m = models[arch]
    target = zipf_shares(m.layers, m.experts, m.top_k, 1.2, seed=4)
    err = m.calibrate(target)
    share = m.pick_shares(m.profile_tokens())
    assert err == pytest.approx(np.abs(share - target).max(), abs=1e-9)
    assert err < 0.03, (share, target)
    for layer in range(m.layers):  # the popular expert is the one the target names
        assert share[layer].argmax() == target[layer].argmax()


def test_a_batchs_topic_mix_moves_popularity(models) -> None:
    m = models["mixtral"]
    m.calibrate(zipf_shares(m.layers, m.experts, m.top_k, 1.0, seed=0))
    per = m.vocab // m.topics
    tokens = m.profile_tokens()
    a = m.pick_shares(tokens[tokens[:, 0] < per])  # topic 0 only
    b = m.pick_shares(tokens[(tokens[:, 0] >= per) & (tokens[:, 0] < 2 * per)])
    assert np.abs(a - b).sum(1).max() > 0.3, (a, b)


def test_measured_loads_map_onto_the_small_models_experts_by_rank_groups() -> None:
    rng = np.random.default_rng(0)
    src = np.vstack([np.zeros((3, 256)), rng.pareto(1.5, size=(58, 256))])  # 3 dense layers
    out = mapped_shares(src, layers=4, experts=8, top_k=2, seed=1)
    assert out.shape == (4, 8) and np.allclose(out.sum(1), 1.0) and out.max() <= 0.5 + 1e-9
    moe = src[3:]
    first = np.sort(moe[0])[::-1]
    top = first[:32].sum() / first.sum()  # the source's top 1/8 of experts
    assert out[0].max() == pytest.approx(min(top, 0.5), rel=1e-6) or top > 0.5
    for bad, match in [
        (np.full((2, 4), np.nan), "finite"),
        (np.zeros((2, 8)), "all zeros"),
    ]:
        with pytest.raises(ValueError, match=match):
            mapped_shares(bad, 2, 4, 1, 0)
    with pytest.raises(ValueError, match="experts"):
        mapped_shares(src, 2, 512, 1, 0)
    assert np.allclose(cap_shares(np.array([8.0, 1.0, 1.0]), 2), [0.5, 0.25, 0.25])


@pytest.mark.data
@pytest.mark.skipif(not DECODE.exists(), reason="../shared/data/moe not present")
def test_deepseek_v3_statistics_calibrate_the_served_model(models) -> None:
    raw = np.asarray(json.loads(DECODE.read_text())["logical_count"], dtype=np.float64)
    m = models["qwen2_moe"]
    target = mapped_shares(raw, m.layers, m.experts, m.top_k, seed=0)
    assert target.max() > 0.35  # DeepSeek-V3's top quarter of experts: a skewed popularity
    assert m.calibrate(target) < 0.03


# ------------------------------------------------------------ the ingress, without a cluster


class _Ref:
    """Stands in for an ObjectRef: awaiting it gives the value."""

    def __init__(self, v: Any) -> None:
        self.v = v

    def __await__(self) -> Any:
        async def get() -> Any:
            return self.v

        return get().__await__()


class _Handle:
    """A device's Serve handle, in-process: ``handle.method.remote(*args)`` runs it."""

    def __init__(self, dev: Any) -> None:
        self.dev = dev

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.dev, name)

        class _M:
            def remote(self, *args: Any) -> Any:
                return fn(*args)

        return _M()


@pytest.mark.parametrize("borrow", [0, 1])
def test_the_ingress_serves_the_models_own_forward(monkeypatch, borrow: int) -> None:
    pytest.importorskip("ray")
    import ray

    from lyra_ray.serving.moe_app import MoEServiceIngress
    from lyra_ray.serving.moe_device import MoEDevice
    from lyra_ray.serving.moe_plan import devices_of

    monkeypatch.setattr(ray, "put", _Ref)
    cls = MoEServiceIngress.func_or_class  # type: ignore[attr-defined]
    ing = cls("moe", {"experts": 4, "top_k": 2, "slots": 3, "borrow": borrow, "skew": 1.5})
    devices = devices_of({"a": 2, "b": 2})
    plain = MoEDevice.func_or_class  # type: ignore[attr-defined]
    devs = {(d.node, d.index): plain(d.node, d.index, None, None, None) for d in devices}
    ing._handle = lambda d: _Handle(devs[(d.node, d.index)])
    ing.servers = {"a": ("app-a", 2), "b": ("app-b", 2)}
    tokens = ing.loads.profile_stream()[:4]

    async def go() -> Any:
        await ing._replan("test")
        return await ing._run_on(ing.table, tokens)

    out = asyncio.run(go())
    ref, routes = ing.model.run(tokens)
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-5)
    counts = np.stack([np.bincount(r.ravel(), minlength=4) for r in routes.numpy()])
    assert (ing.loads.window == counts).all()  # the gate's counts, as phase 2 reads them
    assert ing.loads.batches.regime()[0][0] == pytest.approx(tokens.size * 2)
    plan = ing.plan()
    assert plan["model"]["class"] == "MixtralForCausalLM" and plan["model"]["expert_time"] == "host"
    assert plan["model"]["calibration_error"] < 0.03
    ing._threads.shutdown()


def test_the_ingress_plans_for_the_batch_sizes_it_has_seen(monkeypatch) -> None:
    """Phase 1's re-plans (deploy, lend, reclaim) follow the service's own histogram: after
    decode-sized requests every expert keeps one replica (an extra one only adds a call's
    floor on an H200), after prefill-sized ones the popular experts get more; predicted
    no slower than uniform either way."""
    pytest.importorskip("ray")
    import ray

    from lyra_ray.moe_serving.planner import regime_step_times
    from lyra_ray.serving.moe_app import MoEServiceIngress
    from lyra_ray.serving.moe_device import MoEDevice
    from lyra_ray.serving.moe_plan import devices_of, plan_devices

    monkeypatch.setattr(ray, "put", _Ref)
    cls = MoEServiceIngress.func_or_class  # type: ignore[attr-defined]
    config = {"experts": 4, "slots": 3, "skew": 1.5, "emulate": 1}
    ing = cls("moe", {**config, "cost_dim": 4096, "cost_hidden": 14336})
    devices = devices_of({"a": 2, "b": 2})
    plain = MoEDevice.func_or_class  # type: ignore[attr-defined]
    devs = {(d.node, d.index): plain(d.node, d.index, None, None, None) for d in devices}
    ing._handle = lambda d: _Handle(devs[(d.node, d.index)])
    ing.servers = {"a": ("app-a", 2), "b": ("app-b", 2)}
    counts = {}
    for name, tokens in (("decode", 8.0), ("prefill", 16384.0)):
        for _ in range(2000):  # the histogram forgets the other regime
            ing.loads.batches.observe(tokens)
        asyncio.run(ing._replan(name))
        counts[name] = ing.table.counts
        regime = ing.loads.batches.regime()
        est, cost = ing.loads.estimate, ing.loads.cost
        uniform = plan_devices(np.ones_like(est), 4, 3)
        t = regime_step_times(ing.table.placement, regime, cost, est).sum()
        assert t <= regime_step_times(uniform, regime, cost, est).sum() * (1 + 1e-9)
    assert (counts["decode"] == 1).all(), counts
    assert counts["prefill"].max() > 1 and counts["prefill"].sum(1).max() > 4, counts
    assert ing.plan()["model"]["expert_time"] == "h200"
    ing._threads.shutdown()
