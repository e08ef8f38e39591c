"""The synthetic MoE model: shapes, determinism, numpy experts, and the workload knobs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lyra_ray.moe_serving.experts import expert_ffn
from lyra_ray.moe_serving.model import MoEConfig, MoEModel, fit_bias, pick_shares, zipf_target
from lyra_ray.moe_serving.popularity import load_counts
from lyra_ray.moe_serving.workload import sample_batch, topic_mix


def _routes(cfg: MoEConfig, batches: int = 4, mix: np.ndarray | None = None) -> np.ndarray:
    model = MoEModel(cfg)
    rng = np.random.default_rng(7)
    out = [model.run(sample_batch(cfg, rng, 16, 16, mix))[1].numpy() for _ in range(batches)]
    return np.concatenate(out, axis=1)


def _follow_rate(routes: np.ndarray, experts: int) -> float:
    """Mean over layers of P(most likely next expert | previous expert) for top-1 routes."""
    rates = []
    for layer in range(1, routes.shape[0]):
        joint = np.zeros((experts, experts))
        np.add.at(joint, (routes[layer - 1, :, 0], routes[layer, :, 0]), 1)
        rates.append(joint.max(1).sum() / joint.sum())
    return float(np.mean(rates))


def test_forward_shapes_and_determinism() -> None:
    cfg = MoEConfig(layers=3, experts=4, top_k=2)
    tokens = sample_batch(cfg, np.random.default_rng(0), 3, 5)
    out1, routes = MoEModel(cfg).run(tokens)
    out2, _ = MoEModel(cfg).run(tokens)
    assert out1.shape == (3, 5, cfg.dim)
    assert routes.shape == (3, 15, 2)
    assert torch.equal(out1, out2)
    assert (routes[:, :, 0] != routes[:, :, 1]).all()  # top-2 picks two distinct experts


def test_numpy_expert_matches_torch_expert() -> None:
    model = MoEModel(MoEConfig(dim=16, hidden=48))
    x = torch.randn(33, 16) * 3
    for layer, e in [(0, 0), (2, 5)]:
        ref = model.expert_forward(layer, e, x).detach().numpy()
        got = expert_ffn(x.numpy(), model.expert_weights(layer, e))
        np.testing.assert_allclose(got, ref, atol=1e-5)


def test_pluggable_expert_fn_reproduces_forward() -> None:
    cfg = MoEConfig(layers=2, experts=4, top_k=2)
    model = MoEModel(cfg)
    tokens = sample_batch(cfg, np.random.default_rng(1), 4, 8)
    ref, _ = model.run(tokens)

    def via_numpy(layer: int, e: int, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(expert_ffn(x.numpy(), model.expert_weights(layer, e)))

    got, _ = model.run(tokens, via_numpy)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-5)


def test_top2_weights_are_normalised() -> None:
    cfg = MoEConfig(top_k=2)
    model = MoEModel(cfg)
    h = model.embed(sample_batch(cfg, np.random.default_rng(2), 2, 6))
    _, idx, w = model.route(0, model.attend(0, h))
    assert idx.shape == w.shape == (12, 2)
    np.testing.assert_allclose(w.sum(-1).detach().numpy(), 1.0, atol=1e-6)


def test_skew_knob_concentrates_load() -> None:
    flat = load_counts(_routes(MoEConfig(skew=0.0)), 8)
    skewed = load_counts(_routes(MoEConfig(skew=2.5)), 8)
    top_share = lambda c: float((c.max(1) / c.sum(1)).mean())  # noqa: E731
    assert top_share(skewed) > top_share(flat) + 0.1


def _zipf_by_rank(model: MoEModel) -> np.ndarray:
    """Each layer's intended pick shares [L, E], in the expert order the relabelling gave.

    The initial bias (before calibration) is ``-skew * log1p(rank)`` permuted per layer, so
    an uncalibrated twin of the model carries the rank order.
    """
    twin = MoEModel(model.cfg, calibrate_gates=False)
    return np.stack(
        [zipf_target(blk.gate.bias.detach(), model.cfg.top_k).numpy() for blk in twin.layers]
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("top_k", [1, 2])
def test_skew_is_the_realised_popularity_on_held_out_traffic(seed: int, top_k: int) -> None:
    """Calibrated gates realise the Zipf shares, ranks included, on a sample they never saw."""
    cfg = MoEConfig(layers=2, experts=4, dim=64, hidden=64, skew=1.5, top_k=top_k, seed=seed)
    model = MoEModel(cfg)
    rng = np.random.default_rng(1000 + seed)  # held out: not the profiling sample
    routes = np.concatenate(
        [model.run(sample_batch(cfg, rng, 64, 16))[1].numpy() for _ in range(4)], axis=1
    )
    counts = load_counts(routes, cfg.experts)
    realised = counts / counts.sum(1, keepdims=True)
    target = _zipf_by_rank(model)
    np.testing.assert_allclose(realised, target, atol=0.03)  # measured <= 0.016
    assert (realised.argmax(1) == target.argmax(1)).all()


def test_capped_zipf_target_for_top2() -> None:
    """No expert can hold more than 1/k of top-k picks; the excess goes to the others."""
    bias = -1.5 * torch.log1p(torch.arange(4, dtype=torch.float32))
    t = zipf_target(bias, 2).numpy()
    assert t.sum() == pytest.approx(1.0) and t[0] == pytest.approx(0.5)
    assert (np.diff(t) < 0).all()
    np.testing.assert_allclose(zipf_target(torch.zeros(5), 1).numpy(), 0.2)


def test_fit_bias_reaches_a_reachable_target() -> None:
    logits = torch.randn(4000, 5, generator=torch.Generator().manual_seed(0)) * 2
    target = torch.tensor([0.4, 0.25, 0.15, 0.12, 0.08])
    got = pick_shares(logits + fit_bias(logits, torch.zeros(5), target, 1), 1)
    np.testing.assert_allclose(got.numpy(), target.numpy(), atol=0.01)


def test_correlation_knob_makes_routes_predictable() -> None:
    loose = _follow_rate(_routes(MoEConfig(correlation=0.0, layers=4)), 8)
    tight = _follow_rate(_routes(MoEConfig(correlation=0.95, layers=4)), 8)
    assert tight > loose + 0.1


def test_topic_mix_moves_popularity() -> None:
    cfg = MoEConfig()
    a = load_counts(_routes(cfg, mix=topic_mix(cfg.topics, [0])), 8)
    b = load_counts(_routes(cfg, mix=topic_mix(cfg.topics, [2])), 8)
    shares = lambda c: c / c.sum(1, keepdims=True)  # noqa: E731
    assert np.abs(shares(a) - shares(b)).sum(1).mean() > 0.3


@pytest.mark.parametrize(
    "kwargs",
    [{"top_k": 0}, {"top_k": 9}, {"dim": 30, "heads": 4}, {"correlation": 1.5}, {"vocab": 10}],
)
def test_config_refuses_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        MoEConfig(**kwargs)  # type: ignore[arg-type]
