"""The serving benchmark over several workloads (model seeds) on one local cluster.

WHY a sweep: one seed is one draw of the model's routing, and the gain Lina can get is bounded
by how skewed that draw's realised routing is (``bottleneck.py``). A claim about the method
needs min and median over draws, each with its ideal ratio beside the measured one. One
cluster serves every seed (each seed deploys its app and deletes it): a cluster start costs
~10-15 s and ~1 GB here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.moe.bench import BenchSetup, bench_on_cluster

log = logging.getLogger(__name__)

RATIOS = ("p50_speedup", "p95_speedup", "throughput_ratio")


def seed_setups(setup: BenchSetup, seeds: list[int]) -> list[BenchSetup]:
    """The same benchmark with the model and the traffic drawn from each seed."""
    return [replace(setup, seed=s, cfg=replace(setup.cfg, seed=s)) for s in seeds]


def summarise(runs: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    """Per mode: min and median over runs of each measured ratio and of the ideal ratios."""
    out: dict[str, Any] = {}
    for mode in modes:
        rows = [r[mode] for r in runs]
        cols: dict[str, list[float]] = {k: [row[k] for row in rows] for k in RATIOS}
        for k in RATIOS:
            cols[f"counts_only_{k}"] = [row["lina_counts_only"][k] for row in rows]
        cols["ideal_tokens"] = [row["ideal"]["tokens"]["overall"] for row in rows]
        if all("service" in row["ideal"] for row in rows):
            cols["ideal_service"] = [row["ideal"]["service"]["overall"] for row in rows]
        if all("roofline" in row["ideal"] for row in rows):
            cols["ideal_roofline"] = [row["ideal"]["roofline"]["window"]["overall"] for row in rows]
        if all("unloaded_request" in row["ideal"] for row in rows):
            for q in ("p50", "p95"):
                req = [row["ideal"]["unloaded_request"] for row in rows]
                cols[f"ideal_request_{q}"] = [r[q] for r in req]
                cols[f"ideal_request_{q}_borrow"] = [r["borrow"][q] for r in req]
        out[mode] = {
            k: {"min": float(np.min(v)), "median": float(np.median(v)), "values": v}
            for k, v in cols.items()
        }
    return out


def sweep_result(
    setups: list[BenchSetup], modes: list[str], runs: list[dict[str, Any]], wall_s: float
) -> dict[str, Any]:
    """The sweep's JSON; ``partial`` while fewer runs than setups have finished."""
    return {
        "seeds": [s.seed for s in setups],
        "modes": modes,
        "wall_s": wall_s,
        "partial": len(runs) < len(setups),
        "summary": summarise(runs, modes),
        "runs": runs,
    }


def run_sweep(
    setups: list[BenchSetup],
    modes: list[str],
    num_cpus: int = 2,
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every setup on one private local cluster; results per run plus the summary.

    ``on_run`` gets the sweep so far after every run: a sweep takes ~9 min per seed, and a
    host restart or Ctrl-C during the last seed (or during Serve's shutdown) must not lose
    the seeds that finished.
    """
    from lyra_ray.moe_serving.local_cluster import local_cluster

    devices = max(s.replicas * s.cfg.layers for s in setups)
    runs: list[dict[str, Any]] = []
    calibration: dict[str, Any] | None = None
    t0 = time.perf_counter()
    with local_cluster(num_cpus=num_cpus, num_gpus=devices) as lc:
        for i, setup in enumerate(setups):
            log.warning(
                "run %d/%d (seed %d) starts at %.0f s",
                i + 1,
                len(setups),
                setup.seed,
                time.perf_counter() - t0,
            )
            res = bench_on_cluster(lc, setup, modes, calibration)
            res["host"]["ray_num_cpus"] = num_cpus
            calibration = res.get("calibration", calibration)
            runs.append(res)
            if on_run is not None:
                on_run(sweep_result(setups, modes, runs, time.perf_counter() - t0))
    return sweep_result(setups, modes, runs, time.perf_counter() - t0)
