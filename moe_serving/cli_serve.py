"""`lyra moe serve`: deploy the MoE app on a private local cluster and keep re-planning.

WHY drifting traffic: the demo's request mix moves to another topic every re-plan period, so
phase 2 has real deviations to react to and the log shows replica counts following the load.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import numpy as np

from lyra_ray.model.errors import InputError
from lyra_ray.moe_serving.model import MoEModel
from lyra_ray.moe_serving.setup import ServingSetup, config_from_args, phase1_plan
from lyra_ray.moe_serving.workload import sample_batch, topic_mix

log = logging.getLogger(__name__)


def serve_main(args: argparse.Namespace) -> int:
    from ray import serve

    from lyra_ray.moe_serving.app import APP_NAME, build_app
    from lyra_ray.moe_serving.local_cluster import local_cluster
    from lyra_ray.moe_serving.scaler import Replanner

    if args.replicas < args.experts:
        raise InputError(
            f"--replicas: must be >= --experts (one replica per expert at least), "
            f"got {args.replicas} < {args.experts}"
        )
    cfg = config_from_args(args)
    model = MoEModel(cfg)
    plan = phase1_plan(model, ServingSetup(cfg=cfg, replicas=args.replicas))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with local_cluster(num_cpus=args.num_cpus, num_gpus=args.replicas * cfg.layers) as lc:
        app = build_app(model, plan.counts, gpus_per_replica=1.0, borrow=not args.no_borrow)
        handle = serve.run(app, name=APP_NAME, external_scaler_enabled=True)
        print(f"serving app {APP_NAME!r}; dashboard {lc.dashboard_url}")
        print(f"phase-1 replica counts per layer: {plan.counts.tolist()}")
        rp = Replanner(plan, lc.dashboard_url, threshold=args.threshold)
        rng = np.random.default_rng(args.seed)
        start = time.monotonic()
        next_replan = start + args.replan_every
        served = 0
        while time.monotonic() - start < args.duration:
            period = int((time.monotonic() - start) // args.replan_every)
            mix = topic_mix(cfg.topics, [period % cfg.topics])
            handle.remote(sample_batch(cfg, rng, 8, 16, mix).numpy()).result(timeout_s=120)
            served += 1
            if time.monotonic() >= next_replan:
                layers = rp.step()
                msg = f"re-planned layers {layers}: {rp.placement.counts.tolist()}"
                print(f"[{time.monotonic() - start:5.0f}s] {msg if layers else 'plan holds'}")
                next_replan = time.monotonic() + args.replan_every
        stats = handle.take_dispatch_stats.remote().result(timeout_s=60)
        print(f"served {served} requests; re-plans applied: {len(rp.history)}")
        print(
            f"expert chunks {stats['chunks']}, borrowed {stats['borrowed']}, "
            f"parameter fetches {stats['fetched']}"
        )
    print(f"moe serve: done after {args.duration:.0f} s; its private cluster is shut down")
    return 0
