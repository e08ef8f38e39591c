"""Live scheduling overhead: cycle latency (metrics on / off), preempt -> resume gap.

Phase 1 (latency). A real local cluster with one 1-GPU K80 node; one long job holds
the GPU, 500 jobs queue behind it under FIFO, then ``--probe`` more jobs arrive one at a
time. Each arrival makes the scheduler decide over ~500 queued jobs; we record the full
cycle (inbox + poll + core.step + SQLite persist + apply) and the core.step alone. The
baseline, side by side, is the pure core stepping the same 500 jobs with no Ray at all:
the ratio live/pure is what the live machinery adds. The probes turn the scheduler's
metric export (docs/observability.md) off and on in turn, so the cycles with and without
it are measured side by side; ``metrics_export_*`` is the export's own time per cycle.

Phase 2 (gap). Gavel's max-min fairness time-shares two 1-worker jobs on that GPU with a
short round; every preemption is timed from the stop request to the next run's start.

    python benchmarks/live_overhead.py [--queued 500] [--probe 40] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

log = logging.getLogger("live_overhead")
TRAIN = "lyra_ray.jobs.train_example:train_loop"


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def job(name: str, steps: int, sleep: float, ckpt: int = 10) -> dict[str, Any]:
    return {
        "name": name,
        "total_steps": steps,
        "workers": 1,
        "throughput": {"k80": 1.0},
        "entrypoint": TRAIN,
        "config": {"step_sleep_s": sleep, "checkpoint_every": ckpt},
    }


def pure_baseline(queued: int, probe: int) -> list[float]:
    """core.step times for the same arrivals with the same policy, no Ray."""
    from lyra_ray import model as m
    from lyra_ray.model.spec import parse_job_spec
    from lyra_ray.model.throughput import MeasuredThroughputs, catalogue_throughputs
    from lyra_ray.policies.base import get_policy
    from lyra_ray.scheduling.core import SchedulerCore

    core = SchedulerCore(
        get_policy("fifo_nonpreemptive"), MeasuredThroughputs(catalogue_throughputs())
    )
    core.step(0.0, [m.NodeUp(m.Node("k80-0", "k80", 1))])
    spec = parse_job_spec(job("q", 10, 0.0))
    core.step(1.0, [m.JobSubmitted(f"q{i}", spec) for i in range(queued + 1)])
    times = []
    for i in range(probe):
        t0 = time.perf_counter()
        core.step(2.0 + i, [m.JobSubmitted(f"p{i}", spec)])
        times.append(time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queued", type=int, default=500)
    ap.add_argument("--probe", type=int, default=60)
    ap.add_argument("--round-s", type=float, default=20.0)
    ap.add_argument("--gap-timeout", type=float, default=420.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "live_overhead.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client
    from tests.ray.conftest import start_cluster, stop_cluster

    t_start = time.time()
    live = start_cluster(nodes=(("k80", 1),))
    try:
        base = {
            "state_dir": str(live.workdir / "state1"),
            "storage_path": str(live.workdir / "ckpt"),
            "period_s": 0.5,
        }
        start_scheduler({"policy": "fifo_nonpreemptive", **base})
        c = Client(live.address)
        holder = c.submit(job("holder", 100000, 0.2))
        for i in range(args.queued):
            c.submit(job(f"queued-{i}", 10, 0.0))
        time.sleep(3.0)
        before = len(c.call("stats")["cycle_s"])
        for i in range(args.probe):
            # metrics export on and off in turn: side by side, under the same drift
            c.call("set_metrics_export", i % 2 == 0)
            c.submit(job(f"probe-{i}", 10, 0.0))
            time.sleep(0.6)  # one arrival per cycle
        c.call("set_metrics_export", True)
        time.sleep(2.0)
        cycles = [x for x in c.call("stats")["cycle_s"][before:] if x["jobs"] >= args.queued]
        live_cycle = [x["cycle_s"] for x in cycles]
        live_step = [x["step_s"] for x in cycles]
        with_metrics = [x["cycle_s"] for x in cycles if x["metrics"]]
        without = [x["cycle_s"] for x in cycles if not x["metrics"]]
        export = [x["metrics_s"] for x in cycles if x["metrics"]]
        pure = pure_baseline(args.queued, args.probe)
        log.info("phase 1: %d cycles measured", len(cycles))
        c.cancel(holder)
        # A fresh cluster for phase 2: FIFO starts the next queued job the moment the
        # holder ends, and its detached run would keep the only GPU from phase 2's jobs.
        stop_cluster(live)
        live = start_cluster(nodes=(("k80", 1),))
        base["storage_path"] = str(live.workdir / "ckpt")

        start_scheduler(
            {
                "policy": "max_min_fairness",
                "round_s": args.round_s,
                # short jobs: a 5 s lease (after the first step) lets the rounds swap them
                "min_lease_s": 5.0,
                **base,
                "state_dir": str(live.workdir / "state2"),
            }
        )
        c = Client(live.address)
        ids = [c.submit(job(f"share-{i}", 800, 0.05, ckpt=20)) for i in range(2)]
        deadline = time.monotonic() + args.gap_timeout
        while time.monotonic() < deadline:
            if all(c.status(j)["status"] == "finished" for j in ids):
                break
            time.sleep(2.0)
        gaps = [g["gap_s"] for g in c.call("stats")["gaps"]]
        final = [c.status(j) for j in ids]
    finally:
        stop_cluster(live)

    result = {
        "queued_jobs": args.queued,
        "cycles_measured": len(live_cycle),
        "live_cycle_p50_s": pct(live_cycle, 50),
        "live_cycle_p99_s": pct(live_cycle, 99),
        "live_core_step_p50_s": pct(live_step, 50),
        "live_core_step_p99_s": pct(live_step, 99),
        "pure_core_step_p50_s": pct(pure, 50),
        "pure_core_step_p99_s": pct(pure, 99),
        "ratio_live_cycle_to_pure_step_p50": (
            pct(live_cycle, 50) / pct(pure, 50) if pure and live_cycle else None
        ),
        "cycle_with_metrics_p50_s": pct(with_metrics, 50),
        "cycle_with_metrics_p99_s": pct(with_metrics, 99),
        "cycle_without_metrics_p50_s": pct(without, 50),
        "cycle_without_metrics_p99_s": pct(without, 99),
        "ratio_with_over_without_metrics_p50": (
            pct(with_metrics, 50) / pct(without, 50) if with_metrics and without else None
        ),
        "metrics_export_p50_s": pct(export, 50),
        "metrics_export_p99_s": pct(export, 99),
        "preempt_resume_gap_s": gaps,
        "gap_mean_s": statistics.fmean(gaps) if gaps else None,
        "gap_max_s": max(gaps) if gaps else None,
        "round_s": args.round_s,
        "gap_jobs": [
            {k: s[k] for k in ("name", "status", "steps_done", "num_preemptions", "generation")}
            for s in final
        ],
        "wall_s": time.time() - t_start,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
