"""What a deployment of the MoE app is planned from: the model flags and the phase-1 plan.

WHY its own module: `lyra moe serve` and the serving benchmark (benchmarks/moe/) build the
model and the first replica counts the same way, and the package must not import benchmark
code. Only this shared part lives here; load runs, calibration and sweeps stay benchmarks.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from lyra_ray.moe_serving.model import MoEConfig, MoEModel
from lyra_ray.moe_serving.planner import Placement, plan_lina
from lyra_ray.moe_serving.popularity import PathEstimator, Routes
from lyra_ray.moe_serving.workload import sample_batch


@dataclass(frozen=True)
class ServingSetup:
    """The model, the replica budget per layer, and the shape of the requests phase 1 profiles."""

    cfg: MoEConfig
    replicas: int = 16  # per layer
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


def phase1_plan(model: MoEModel, setup: ServingSetup) -> Placement:
    """Phase 1: plan replica counts from the estimated loads."""
    # each replica is one device (one slot): packing is trivial, counts are the plan
    return plan_lina(phase1_load(model, setup), setup.replicas, setup.replicas, 1)


def config_from_args(args: argparse.Namespace) -> MoEConfig:
    """The model flags (``lyra_ray.moe_serving.cli.add_model_args``) as a config."""
    return MoEConfig(
        layers=args.layers,
        experts=args.experts,
        dim=args.dim,
        hidden=args.hidden,
        heads=4,
        skew=args.skew,
        correlation=args.correlation,
        seed=args.seed,
    )
