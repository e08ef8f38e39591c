"""The synthetic MoE model: shapes, determinism, numpy experts, and the workload knobs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from moe_serving.experts import expert_ffn
from moe_serving.model import MoEConfig, MoEModel
from moe_serving.popularity import load_counts
from moe_serving.workload import sample_batch, topic_mix


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
