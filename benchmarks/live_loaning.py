"""Live capacity loaning, on and off, side by side on one local cluster.

One embedded Ray cluster (a training server and two inference servers of one GPU type,
fake GPUs), two runs of the same compressed day, one after the other: the ``lyra``
policy with loaning off, then on. Each run deploys the same dense Serve service, drives
the same diurnal HTTP traffic at it (trough at the start and end of the day, peak in
the middle) and submits the same stream of elastic Ray Train jobs. Reported per run, in
``benchmarks/results/live_loaning.json`` and on stdout:

- training GPU-seconds delivered during the day, mean JCT and queuing of the jobs;
- inference p50 / p99 latency and failed requests;
- reclaim latency (demand rise to the server serving again): every reclaim's, p50 / p99 / max;
- on-loan utilisation: GPU time training used on lent servers over GPU time lent,
  sampled every two seconds.

    .venv/bin/python benchmarks/live_loaning.py [--day-s 300] [--jobs 6] [--peak-rps 30]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._scratch_cluster import scratch_cluster  # noqa: E402
from lyra_ray.ops.embedded import EmbeddedCluster  # noqa: E402
from lyra_ray.ops.ports import free_port  # noqa: E402
from lyra_ray.serving.load import LoadReport, run_load  # noqa: E402
from lyra_ray.serving.load_pattern import LoadPattern  # noqa: E402

GPU = "t4"
SERVICE = {
    "name": "dense",
    "import_path": "dense_app:app",  # examples/dense: a plain Serve app, its folder shipped
    "args": {"hidden": 256, "layers": 4, "modelled_ms": 300},  # GPU-like time, explicitly
    "runtime_env": {"working_dir": str(ROOT / "examples" / "dense")},
    "deployments": [
        {"name": "DenseModel", "ray_actor_options": {"num_gpus": 1, "num_cpus": 0}},
        {"name": "Api", "ray_actor_options": {"num_cpus": 0}},
    ],
    "target_ongoing_per_replica": 3.0,
    "smoothing_s": 3.0,
    "down_after_s": 10.0,
}


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _jobs(n: int, day_s: float, steps: int) -> list[tuple[float, dict[str, Any]]]:
    """Elastic jobs arriving evenly over the first two thirds of the day."""
    out = []
    for i in range(n):
        out.append(
            (
                i * (2 * day_s / 3) / max(1, n),
                {
                    "name": f"train-{i}",
                    "total_steps": steps,
                    "min_workers": 1,
                    "max_workers": 4,
                    "scaling": "linear",
                    "throughput": {GPU: 1.0},
                    "entrypoint": "lyra_ray.jobs.train_example:train_loop",
                    "config": {"work_per_step_s": 0.4, "checkpoint_every": 20},
                },
            )
        )
    return out


def _sample(client: Any, samples: list[dict[str, float]]) -> None:
    view = client.overview()
    lent = {n["id"]: n["gpus"] for n in view["nodes"] if n["state"] == "lent"}
    used = 0
    for j in view["jobs"]:
        a = j.get("assignment")
        if a and j["status"] == "running":
            used += sum(g for n, g in a["nodes"] if n in lent)
    samples.append({"lent_gpus": float(sum(lent.values())), "used_on_lent": float(used)})


def run_arm(
    cl: EmbeddedCluster, loaning: bool, day_s: float, jobs: int, steps: int, peak_rps: float
) -> dict[str, Any]:
    import ray

    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import TERMINAL, Client

    arm = "on" if loaning else "off"
    start_scheduler(
        {
            "policy": "lyra",
            "policy_args": {"loaning": loaning, "reserve_fraction": 0.0, "lend_after_s": None},
            "state_dir": str(cl.workdir / f"state-{arm}"),
            "storage_path": str(cl.workdir / f"ckpt-{arm}"),
            "period_s": 1.0,
            "serve_port": free_port(),
        }
    )
    client = Client(cl.address)
    url = client.deploy_service(SERVICE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        svc = client.overview()["serving"]["services"][0]
        if svc["ready"] >= 2:
            break
        time.sleep(1.0)
    pattern = LoadPattern(
        kind="diurnal", peak_rps=peak_rps, duration_s=day_s, period_s=day_s, trough_fraction=0.05
    )
    report: list[LoadReport] = []
    loader = threading.Thread(target=lambda: report.append(run_load(url, pattern, seed=0)))
    t0 = time.monotonic()
    loader.start()
    ids: list[str] = []
    samples: list[dict[str, float]] = []
    stream = _jobs(jobs, day_s, steps)
    while time.monotonic() - t0 < day_s:
        while stream and stream[0][0] <= time.monotonic() - t0:
            ids.append(client.submit(stream.pop(0)[1]))
        _sample(client, samples)
        time.sleep(2.0)
    loader.join()
    day = client.list()
    gpu_s_day = sum(float(j["gpu_s"]) for j in day)
    end = time.monotonic() + 3 * day_s  # let the stream finish for JCTs, without traffic
    while time.monotonic() < end and not all(client.status(j)["status"] in TERMINAL for j in ids):
        time.sleep(2.0)
    final = [client.status(j) for j in ids]
    done = [j for j in final if j["status"] == "finished"]
    reclaims = client.overview()["serving"]["reclaims"]
    lat = [float(r["latency_s"]) for r in reclaims]
    lent = sum(s["lent_gpus"] for s in samples)
    load = report[0]
    for j in ids:
        if client.status(j)["status"] not in TERMINAL:
            client.cancel(j)
    client.remove_service("dense")
    ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE), no_restart=True)
    return {
        "loaning": loaning,
        "training_gpu_s_during_day": gpu_s_day,
        "jobs": len(ids),
        "jobs_finished": len(done),
        "mean_jct_s": statistics.mean(j["queued_s"] + j["run_s"] for j in done) if done else None,
        "mean_queue_s": statistics.mean(j["queued_s"] for j in done) if done else None,
        "inference": load.to_dict(),
        "reclaims": len(lat),
        # every reclaim, not only quantiles: with two or three samples a p50 is just one
        # of them, and the doc names each (demand rise to serving, and since the action)
        "reclaim_latencies_s": lat,
        "reclaim_since_action_s": [float(r["since_action_s"]) for r in reclaims],
        "reclaim_latency_p50_s": statistics.median(lat) if lat else None,
        "reclaim_latency_p99_s": _pct(lat, 0.99),
        "reclaim_latency_max_s": max(lat) if lat else None,
        "on_loan_utilisation": (sum(s["used_on_lent"] for s in samples) / lent) if lent else None,
        "lent_gpu_s": 2.0 * lent,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--day-s", type=float, default=300.0, help="one compressed day")
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=300, help="steps per job")
    ap.add_argument("--peak-rps", type=float, default=30.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "live_loaning.json"))
    args = ap.parse_args(argv)
    for name in ("day_s", "peak_rps"):
        if not 0 < getattr(args, name) < 1e5:
            ap.error(f"--{name.replace('_', '-')} must be in (0, 1e5)")
    if not 1 <= args.jobs <= 100 or not 1 <= args.steps <= 100_000:
        ap.error("--jobs must be in [1, 100] and --steps in [1, 100000]")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    results: dict[str, Any] = {}
    with scratch_cluster([(GPU, 2)], [(GPU, 2), (GPU, 2)]) as cl:
        for loaning in (False, True):
            arm = "on" if loaning else "off"
            print(f"loaning {arm}: a {args.day_s:.0f} s day ...", flush=True)
            results[arm] = run_arm(cl, loaning, args.day_s, args.jobs, args.steps, args.peak_rps)
            r = results[arm]
            print(
                f"loaning {arm}: {r['training_gpu_s_during_day']:.0f} training GPU-s, "
                f"mean JCT {r['mean_jct_s']}, inference p99 {r['inference']['p99_ms']} ms, "
                f"{r['inference']['failed']} failed, {r['reclaims']} reclaims",
                flush=True,
            )
    off, on = results["off"], results["on"]
    results["gpu_s_ratio_on_over_off"] = (
        on["training_gpu_s_during_day"] / off["training_gpu_s_during_day"]
        if off["training_gpu_s_during_day"]
        else None
    )
    results["setup"] = {
        "day_s": args.day_s,
        "jobs": args.jobs,
        "steps": args.steps,
        "peak_rps": args.peak_rps,
        "cluster": "training t4x2, inference 2 x t4x2 (fake GPUs)",
        "service": SERVICE,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"training GPU-s with loaning / without: {results['gpu_s_ratio_on_over_off']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
