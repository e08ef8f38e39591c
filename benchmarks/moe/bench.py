"""Serving benchmark: popularity-based (Lina) replicas vs uniform replicas, same budget.

WHY this protocol: both plans run on the same deployed app, one after the other, with the same
request sequence; only replica counts differ, switched through the external scaler. The
uniform baseline gives every expert ``budget / experts`` replicas — "one replica per expert",
replicated evenly to use the same budget. Lina's counts come from phase 1 (path estimator on
profiled traffic) refined by phase 2 on the gate's actual counts from the baseline run.

Two modes:
- ``real``: expert replicas compute the real FFN. Two host cores cannot run 32 replicas in
  parallel, so this mode mostly measures CPU contention, not replica parallelism.
- ``calibrated``: each replica stands for one device: it computes the real output, then sleeps
  out a service time fitted (fixed + per-token) to the real expert's compute measured inside a
  replica process in the real mode. Labelled as such in the output. With ``service="h200"``
  (``--service h200``) the service time is instead the H200 expert-time model
  (``moe_serving/expert_time.py``: a roofline with a launch floor, fitted to a measured H200)
  of the call's tokens for the device expert's shape.

Beside each measured ratio the output carries the ideal one (``bottleneck.py``): the busiest
replica's work under uniform counts over that under Lina's, from the gate's actual counts
of the measured requests. ``bench_sweep.py`` runs this per seed on one cluster; the phase-1
plan is the one `lyra moe serve` deploys (``moe_serving/setup.py``).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.bottleneck import ideal_report
from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.model import MoEModel
from lyra_ray.moe_serving.planner import replan
from lyra_ray.moe_serving.popularity import load_counts
from lyra_ray.moe_serving.setup import (
    ServingSetup,
    config_from_args,
    phase1_plan,
    request_stream,
    routes_of,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchSetup(ServingSetup):
    """A serving setup plus the measured load and the device expert the calibrated mode times."""

    requests: int = 120
    concurrency: int = 4
    device_dim: int = 4096  # calibrated mode: the expert a "device" runs (Mixtral-8x7B-sized)
    device_hidden: int = 14336
    service: str = "host"  # calibrated mode: "host" (fit timed here) or a GPU of expert_time

    @property
    def device_expert(self) -> ExpertCost:
        """The device expert under the expert-time model (H200 unless ``service`` names
        another known GPU)."""
        return ExpertCost(
            self.device_dim, self.device_hidden, "h200" if self.service == "host" else self.service
        )


def run_load(handle: Any, reqs: list[npt.NDArray[np.int64]], concurrency: int) -> dict[str, Any]:
    """Closed loop: ``concurrency`` clients send the requests; latency per request."""

    def one(t: npt.NDArray[np.int64]) -> float:
        t0 = time.perf_counter()
        handle.remote(t).result(timeout_s=300)
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        lat = np.array(list(pool.map(one, reqs)))
    wall = time.perf_counter() - t0
    tokens = sum(int(t.size) for t in reqs)
    return {
        "p50_ms": float(np.percentile(lat, 50) * 1e3),
        "p95_ms": float(np.percentile(lat, 95) * 1e3),
        "mean_ms": float(lat.mean() * 1e3),
        "tokens_per_s": tokens / wall,
        "requests": len(reqs),
        "wall_s": wall,
    }


def calibrate(setup: BenchSetup, sizes: tuple[int, ...] = (8, 32, 64, 128)) -> dict[str, Any]:
    """Fit fixed + per-token seconds to a device-sized expert's compute, timed in a replica.

    Timed inside an expert replica process (numpy, one Ray worker), for an FFN expert of
    shape ``device_dim -> device_hidden -> device_dim``.
    """
    from ray import serve

    from lyra_ray.moe_serving.app import APP_NAME, expert_name

    h = serve.get_deployment_handle(expert_name(0, 0), APP_NAME)
    d, hid = setup.device_dim, setup.device_hidden
    secs = [h.compute_seconds.remote(n, d, hid, 3).result(timeout_s=300) for n in sizes]
    per_token, fixed = np.polyfit(np.array(sizes, dtype=float), np.array(secs), 1)
    return {
        "fixed_s": max(0.0, float(fixed)),
        "per_token_s": max(1e-9, float(per_token)),
        "transfer_s": h.transfer_seconds.remote(d, hid).result(timeout_s=300),
        "measured_s": dict(zip(map(str, sizes), secs, strict=True)),
        "device_expert": f"FFN {d} -> {hid} -> {d}, float32, one host core",
        "transfer": "copy of that expert's two weight matrices in a replica process",
    }


NVLINK_BPS = 450e9
"""H200 NVLink 4, one direction (nominal, not measured): a borrowed expert's bf16 weights
travel at this rate under ``--service h200``."""


def model_calibration(setup: BenchSetup) -> dict[str, Any]:
    """The calibrated mode's service time from the expert-time model instead of a host fit."""
    c = setup.device_expert
    nbytes = 3 * c.dim * c.hidden * 2
    return {
        "fixed_s": 0.0,
        "per_token_s": 0.0,
        "transfer_s": nbytes / NVLINK_BPS,
        "expert_model": {"dim": c.dim, "hidden": c.hidden, "gpu": c.gpu},
        "measured_s": {str(n): c.seconds(n) for n in (8, 32, 64, 128)},
        "device_expert": f"SwiGLU {c.dim} x {c.hidden}, bf16, expert-time model ({c.gpu})",
        "transfer": f"bf16 weights ({nbytes / 1e6:.0f} MB) at {NVLINK_BPS / 1e9:.0f} GB/s "
        "(assumed NVLink, not measured)",
    }


def _ratios(base: dict[str, Any], plan: dict[str, Any]) -> dict[str, float]:
    """Latency and throughput ratios of ``plan`` over ``base`` (> 1 = ``plan`` better)."""
    return {
        "p95_speedup": base["p95_ms"] / plan["p95_ms"],
        "p50_speedup": base["p50_ms"] / plan["p50_ms"],
        "throughput_ratio": plan["tokens_per_s"] / base["tokens_per_s"],
    }


def _pair(base: dict[str, Any], lina: dict[str, Any], static: dict[str, Any]) -> dict[str, Any]:
    """Uniform and Lina side by side with their ratios; Lina's counts alone as well."""
    return {
        "uniform": base,
        "lina": lina,
        **_ratios(base, lina),
        "lina_counts_only": {"run": static, **_ratios(base, static)},
    }


LABELS = {
    "calibrated": (
        "CALIBRATED SERVICE TIME: each replica stands for one device; a call takes "
        "fixed + per_token * tokens, fitted to a device-sized expert's compute measured "
        "in a replica process; token counts per call come from the real gate"
    ),
    "calibrated_model": (
        "CALIBRATED SERVICE TIME (MODEL): each replica stands for one device; a call takes "
        "the H200 expert-time model (roofline with a launch floor, moe_serving/expert_time.py) "
        "of its tokens for the device expert's shape; token counts per call come from the "
        "real gate"
    ),
    "real": (
        "REAL: replicas compute the served expert FFN; the host's few cores are shared by "
        "all replicas and the ingress, so replicas do not truly run in parallel"
    ),
}


def bench_on_cluster(
    lc: Any,
    setup: BenchSetup,
    modes: list[str],
    calibration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One workload (one seed) on a running local cluster; returns the JSON-able result.

    One deployment with uniform counts; every mode is measured on it; then the external
    scaler switches to Lina's counts and every mode is measured again; the app is deleted at
    the end so the next workload can deploy on the same cluster. ``calibration`` (the fitted
    service time) is measured on this deployment when not given, so a sweep times the device
    expert once and every seed runs with the same service time.
    """
    from ray import serve

    from lyra_ray.moe_serving.app import APP_NAME, ServiceTime, build_app
    from lyra_ray.moe_serving.scaler import apply_counts

    cfg = setup.cfg
    model = MoEModel(cfg)
    plan = phase1_plan(model, setup)
    uniform = np.full((cfg.layers, cfg.experts), setup.replicas // cfg.experts, dtype=np.int64)
    out: dict[str, Any] = {
        "setup": {**asdict(setup), "cfg": asdict(cfg)},
        "phase1_counts": plan.counts.tolist(),
        "uniform_counts": uniform.tolist(),
        "host": {"cpus": os.cpu_count(), "fake_gpus": setup.replicas * cfg.layers},
    }
    reqs = request_stream(setup, setup.requests, setup.seed)
    warm = request_stream(setup, 2 * setup.concurrency, setup.seed + 1)
    t0 = time.perf_counter()
    handle = serve.run(
        build_app(model, uniform, gpus_per_replica=1.0),
        name=APP_NAME,
        external_scaler_enabled=True,
    )
    out["deploy_s"] = time.perf_counter() - t0
    log.warning(
        "seed %d: deployed %d replicas in %.1f s", setup.seed, uniform.sum(), out["deploy_s"]
    )
    try:
        services: dict[str, ServiceTime | None] = {}
        if "real" in modes:
            services["real"] = None
        if "calibrated" in modes:
            if setup.service == "host":
                out["calibration"] = calibration or calibrate(setup)
            else:
                out["calibration"] = model_calibration(setup)
            c = out["calibration"]
            services["calibrated"] = ServiceTime(
                c["fixed_s"],
                c["per_token_s"],
                c.get("transfer_s", 0.0),
                setup.device_expert if "expert_model" in c else None,
            )

        def measure(plan_name: str, borrow: bool) -> tuple[dict[str, dict[str, Any]], Any]:
            """Every mode on the current counts; the gate's counts of the measured requests."""
            res, window = {}, None
            handle.set_borrow.remote(borrow).result()
            for mode, st in services.items():
                handle.set_service.remote(st).result()
                run_load(handle, warm, setup.concurrency)
                handle.take_window.remote().result()  # drop the warm-up's counts
                handle.take_dispatch_stats.remote().result()
                res[mode] = run_load(handle, reqs, setup.concurrency)
                res[mode]["dispatch"] = handle.take_dispatch_stats.remote().result()
                window = np.asarray(handle.take_window.remote().result(), dtype=np.float64)
                log.warning(
                    "seed %d %s %s: p50 %.0f ms, p95 %.0f ms",
                    setup.seed,
                    plan_name,
                    mode,
                    res[mode]["p50_ms"],
                    res[mode]["p95_ms"],
                )
            return res, window

        base, actual = measure("uniform", borrow=False)
        lina_plan, layers = replan(plan, actual, threshold=0.1)  # phase 2 on the gate's counts
        t0 = time.perf_counter()
        apply_counts(lc.dashboard_url, uniform, lina_plan.counts)
        out["rescale_s"] = time.perf_counter() - t0
        out["lina_counts"] = lina_plan.counts.tolist()
        out["phase2_layers"] = layers
        static, _ = measure("lina counts only", borrow=False)
        lina, _ = measure("lina", borrow=True)
    finally:
        serve.delete(APP_NAME)
    # per-request counts from the in-process gate (the served gate's, by the equality test)
    per_request = np.stack([load_counts(routes_of(model, t), cfg.experts) for t in reqs])
    for mode, st in services.items():
        ideal = ideal_report(
            actual,
            uniform,
            lina_plan.counts,
            setup.requests,
            None if st is None or st.expert is not None else (st.fixed_s, st.per_token_s),
            per_request,
            expert=setup.device_expert,
        )
        label = LABELS[mode]
        if st is not None and st.expert is not None:
            label = LABELS["calibrated_model"]
        out[mode] = {
            "label": label,
            **_pair(base[mode], lina[mode], static[mode]),
            "ideal": ideal,
        }
    return out


def setup_from_args(args: argparse.Namespace) -> BenchSetup:
    """The benchmark's flags (benchmarks/moe_serving.py) as a setup."""
    return BenchSetup(
        cfg=config_from_args(args),
        replicas=args.replicas,
        requests=args.requests,
        seed=args.seed,
        batch=args.batch,
        seq=args.seq,
        concurrency=args.concurrency,
        device_dim=args.device_dim,
        device_hidden=args.device_hidden,
        service=getattr(args, "service", "host"),
    )
