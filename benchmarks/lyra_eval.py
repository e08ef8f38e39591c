"""Lyra's evaluation table on a Philly-derived workload: Baseline / Basic / Lyra / Ideal.

Workload (documented in docs/lyra.md):

* Jobs: a contiguous window of real submissions from Microsoft's Philly trace
  (``../shared/data/pollux/philly.csv``, cluster ``6214e9``): real inter-arrival times,
  real durations (clipped at ``--max-duration-h``) and real GPU counts.
* Elastic share: a seeded ``--elastic-share`` of the jobs become elastic, each with a
  measured scaling curve drawn from the six Pollux profiles (``policies/lyra/curves.json``):
  ``min = max(1, g // 2)``, ``max = 2 g``, requested size ``g``. Steps are set so that
  the job takes exactly its Philly duration at its requested size on a V100.
* Cluster: a training pool of V100 servers and an inference pool of T4 servers whose
  serving demand follows a seeded diurnal curve (mean ~40 %, the paper's figure). A T4
  trains at ``--t4-speed`` of a V100 per worker (an assumption: no T4 profile is
  shipped; ~0.4 is the usual fp32 ratio).

Scenarios: Baseline (``lyra-baseline``: no loaning, jobs at their requested size, SJF
admission), Basic (``basic``: loaning with naive reclaim, greedy elasticity), Lyra
(``lyra``), Ideal (``lyra`` with zero checkpoint/restore cost, so reclaims cost nothing).
A fifth run repeats Lyra with loaned GPUs as fast as V100s (``--no-sensitivity`` skips it):
the T4 speed is the assumption the result depends on most.
Run: ``.venv/bin/python benchmarks/lyra_eval.py`` -> ``benchmarks/results/lyra_eval.json``
(~2-4 min on 2 cores).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from lyra_ray.model import JobSpec, Node, scaling
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.sim.serving import demand_series, diurnal, mean_utilisation
from lyra_ray.sim.simulator import Simulator
from policies.base import get_policy

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("lyra_eval")
CURVES = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
KEYS = (
    "avg_queue_s", "median_queue_s", "p95_queue_s", "avg_jct_s", "median_jct_s", "p95_jct_s",
    "gpu_usage_training", "gpu_usage_overall", "preemption_ratio", "on_loan_utilisation",
    "reclaims", "reclaim_preemptions", "preemptions", "resizes", "completed_jobs", "makespan_s",
    "wall_s",
)  # fmt: skip


def shared_data() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


def _rel(p: Path) -> str:
    """Paths in the report relative to the repository, so it does not name this machine."""
    return str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p)


def philly_window(path: Path, cluster: str, start: int, n: int) -> list[tuple[float, float, int]]:
    """``(arrival_s from the window's first job, duration_s, gpus)`` of ``n`` real jobs."""
    rows = [r for r in csv.DictReader(path.open()) if r["cluster"] == cluster]
    rows.sort(key=lambda r: r["timestamp"])
    win = rows[start : start + n]
    t0 = dt.datetime.fromisoformat(win[0]["timestamp"]).timestamp()
    return [
        (
            dt.datetime.fromisoformat(r["timestamp"]).timestamp() - t0,
            float(r["duration"]),
            int(r["num_gpus"]),
        )
        for r in win
    ]


def make_jobs(raw: list[tuple[float, float, int]], args: argparse.Namespace) -> list[JobSpec]:
    rnd = random.Random(args.seed)
    cap_s = args.max_duration_h * 3600.0
    jobs: list[JobSpec] = []
    for i, (arrival, duration, g) in enumerate(raw):
        d = max(1.0, min(duration, cap_s))
        tput = {"v100": 1.0, "t4": args.t4_speed}
        if rnd.random() < args.elastic_share:
            curve = rnd.choice(CURVES)
            steps = d * scaling.speedup(curve, g)
            jobs.append(JobSpec(
                name=f"p{i}", total_steps=steps, min_workers=max(1, g // 2), max_workers=2 * g,
                throughput=tput, scaling=curve, arrival_s=arrival,
                config={"requested_workers": g},
            ))  # fmt: skip
        else:
            jobs.append(JobSpec(
                name=f"p{i}", total_steps=d * g, min_workers=g, max_workers=g,
                throughput=tput, arrival_s=arrival,
            ))  # fmt: skip
    return jobs


def cluster(args: argparse.Namespace) -> list[Node]:
    train = [Node(f"v{i:03d}", "v100", args.gpus_per_node) for i in range(args.train_nodes)]
    infer = [
        Node(f"t{i:03d}", "t4", args.gpus_per_node, "inference") for i in range(args.infer_nodes)
    ]
    return train + infer


def run(
    name: str, policy: str, overhead: float, jobs: list[JobSpec], args: argparse.Namespace,
    demand: list[tuple[float, int]],
) -> dict[str, Any]:  # fmt: skip
    sim = Simulator(
        cluster(args), get_policy(policy), SpecThroughputs(), resize_overhead_s=overhead,
        serving_demand=demand,
    )  # fmt: skip
    t0 = time.perf_counter()
    res = sim.run(jobs)
    out = {k: res.summary.get(k) for k in KEYS}
    out["policy"], out["resize_overhead_s"] = policy, overhead
    # Mean JCT minus mean queuing: how long jobs ran (slower on loaned T4s, plus restarts).
    out["mean_run_s"] = float(res.summary["avg_jct_s"]) - float(res.summary["avg_queue_s"])
    log.info("%s done in %.1f s: %s", name, time.perf_counter() - t0, out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="Lyra Baseline/Basic/Lyra/Ideal on Philly jobs")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--start", type=int, default=5000, help="first job of the window")
    ap.add_argument("--cluster-id", default="6214e9")
    ap.add_argument("--train-nodes", type=int, default=12)
    ap.add_argument("--infer-nodes", type=int, default=16)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--elastic-share", type=float, default=0.5)
    ap.add_argument("--max-duration-h", type=float, default=24.0)
    ap.add_argument("--t4-speed", type=float, default=0.4)
    ap.add_argument("--resize-overhead", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenarios", default="baseline,basic,lyra,ideal")
    ap.add_argument(
        "--no-sensitivity",
        dest="sensitivity",
        action="store_false",
        help="skip the extra Lyra run with loaned GPUs as fast as V100s",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lyra_eval.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    philly = shared_data() / "pollux" / "philly.csv"
    if not philly.is_file():
        print(f"skipped: {philly} not found (set LYRA_SHARED_DATA)")
        return 0
    raw = philly_window(philly, args.cluster_id, args.start, args.jobs)
    jobs = make_jobs(raw, args)
    horizon = raw[-1][0] + 3 * 86_400.0
    points = diurnal(args.infer_nodes, horizon, seed=args.seed)
    demand = demand_series(points)
    scen = {
        "baseline": ("lyra-baseline", args.resize_overhead),
        "basic": ("basic", args.resize_overhead),
        "lyra": ("lyra", args.resize_overhead),
        "ideal": ("lyra", 0.0),
    }
    results = {
        s: run(s, *scen[s], jobs, args, demand) for s in args.scenarios.split(",") if s in scen
    }
    if args.sensitivity:
        # The one assumption that moves the result most: how fast loaned GPUs train.
        fast = argparse.Namespace(**{**vars(args), "t4_speed": 1.0})
        results["lyra_loaned_gpus_as_fast_as_v100"] = run(
            "lyra (t4-speed 1.0)", "lyra", args.resize_overhead, make_jobs(raw, fast), fast, demand
        )
    base = results.get("baseline")
    ratios: dict[str, dict[str, float]] = {}
    if base:
        for s, r in results.items():
            ratios[s] = {
                k: base[k] / r[k] if r[k] else float("inf")
                for k in ("avg_queue_s", "avg_jct_s", "p95_queue_s", "p95_jct_s")
            }
    report = {
        "workload": {
            "source": f"philly.csv cluster {args.cluster_id}, jobs {args.start}.."
            f"{args.start + args.jobs - 1}",
            "jobs": len(jobs),
            "elastic_jobs": sum(1 for j in jobs if j.elastic),
            "span_h": raw[-1][0] / 3600.0,
            "gpus_1": sum(1 for _, _, g in raw if g == 1),
            "serving_mean_utilisation": mean_utilisation(points, args.infer_nodes),
            "args": {k: (_rel(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        },
        "scenarios": results,
        "improvement_vs_baseline": ratios,
        "goal": {"queue_x": 2.0, "jct_x": 1.6, "preemption_ratio_max": 0.05},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(json.dumps({"improvement_vs_baseline": ratios}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
