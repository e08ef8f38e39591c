"""What the MoE service's first plan is made from: phase 1's profiled load estimate.

WHY its own module: the service's ingress (``lyra_ray/serving/moe_app.py``) estimates the
coming traffic's loads before any request arrives, with the path estimator over a seeded
profiling stream; this is plain torch and numpy, testable without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from lyra_ray.moe_serving.model import MoEConfig, MoEModel
from lyra_ray.moe_serving.popularity import PathEstimator, Routes
from lyra_ray.moe_serving.workload import sample_batch


@dataclass(frozen=True)
class ServingSetup:
    """The model and the shape of the requests phase 1 profiles."""

    cfg: MoEConfig
    batch: int = 16  # sequences per request
    seq: int = 16
    seed: int = 0


def request_stream(setup: ServingSetup, n: int, seed: int) -> list[npt.NDArray[np.int64]]:
    """Requests whose topic mix varies request to request (Dirichlet), reproducibly."""
    rng = np.random.default_rng(seed)
    cfg = setup.cfg
    return [
        sample_batch(cfg, rng, setup.batch, setup.seq, rng.dirichlet(np.full(cfg.topics, 0.5)))
        .numpy()
        .astype(np.int64)
        for _ in range(n)
    ]


def routes_of(model: MoEModel, tokens: npt.NDArray[np.int64]) -> Routes:
    """The in-process gate's routes for one request (the served gate computes the same)."""
    routes: Routes = model.run(torch.as_tensor(tokens))[1].numpy()
    return routes


def phase1_load(model: MoEModel, setup: ServingSetup) -> npt.NDArray[np.float64]:
    """Profile paths in-process and estimate the coming traffic's loads [L, E]."""
    cfg = model.cfg
    est = PathEstimator(cfg.layers, cfg.experts, history=min(2, cfg.layers - 1))
    for t in request_stream(setup, 16, setup.seed + 100):
        est.observe(routes_of(model, t))
    load = np.zeros((cfg.layers, cfg.experts))
    for t in request_stream(setup, 8, setup.seed + 200):
        load += est.estimate_all(routes_of(model, t))
    return load
