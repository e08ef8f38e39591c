"""Estimator quality under correlated routing and a shift in batch composition.

WHY this protocol: both estimators profile the same traffic (batches whose topic mix varies),
then serving traffic shifts to a different mix and keeps varying batch to batch. Both keep
learning online from each served batch. The path estimator predicts each layer from the
batch's own earlier routes; the marginal one from the average of past batches.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from lyra_ray.moe_serving.model import MoEConfig, MoEModel
from lyra_ray.moe_serving.popularity import (
    MarginalEstimator,
    PathEstimator,
    load_counts,
    load_error,
)
from lyra_ray.moe_serving.workload import sample_batch, topic_mix


def compare_estimators(
    seed: int = 0,
    profile_batches: int = 30,
    test_batches: int = 20,
    cfg: MoEConfig | None = None,
    batch: int = 32,
    seq: int = 16,
    history: int = 2,
) -> dict[str, Any]:
    """Mean relative L1 load error (layers >= 1) of both estimators over the test batches."""
    cfg = cfg or MoEConfig(layers=4, experts=8, top_k=2, skew=1.0, correlation=0.9)
    model = MoEModel(cfg)
    rng = np.random.default_rng(seed)
    path = PathEstimator(cfg.layers, cfg.experts, history=history)
    marg = MarginalEstimator(cfg.layers, cfg.experts)
    for _ in range(profile_batches):
        mix = rng.dirichlet(np.full(cfg.topics, 0.5))
        routes = model.run(sample_batch(cfg, rng, batch, seq, mix))[1].numpy()
        path.observe(routes)
        marg.observe(load_counts(routes, cfg.experts))
    shifted = topic_mix(cfg.topics, [cfg.topics - 1])
    pe: list[float] = []
    me: list[float] = []
    for i in range(test_batches):
        mix = shifted if i < test_batches // 2 else rng.dirichlet(np.full(cfg.topics, 0.5))
        routes = model.run(sample_batch(cfg, rng, batch, seq, mix))[1].numpy()
        actual = load_counts(routes, cfg.experts)
        picks = routes.shape[1] * routes.shape[2]
        pe.append(load_error(path.estimate_all(routes)[1:], actual[1:]))
        me.append(load_error(marg.estimate_all(picks)[1:], actual[1:]))
        path.observe(routes)
        marg.observe(actual)
    return {
        "path_error": float(np.mean(pe)),
        "marginal_error": float(np.mean(me)),
        "path_error_per_batch": pe,
        "marginal_error_per_batch": me,
        "config": asdict(cfg),
        "history": history,
        "profile_batches": profile_batches,
        "test_batches": test_batches,
    }
