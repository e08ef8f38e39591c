"""The price of a resize, measured on a local cluster: where each resize's time goes.

One embedded Ray cluster (one node of four fake V100s) and the live scheduler with a
small greedy elastic policy. An elastic Ray Train job (2-4 workers, the example model)
runs beside short rigid jobs: each rigid arrival shrinks it to 2 workers, each rigid
finish grows it back to 4, so every cycle is two real resizes (checkpoint, stop, new
worker group, restore). The runtime records each resize's phases
(``lyra_ray/runtime/restart_phases.py``); this script collects them and writes
``benchmarks/results/resize_phases.json`` with every record and each phase's median,
which ``lyra_ray/model/restart_cost.py`` copies (a unit test keeps them equal).

    .venv/bin/python benchmarks/resize_phases.py [--cycles 3]

Fake GPUs and a tiny model: the phases are Ray's and lyra's own overheads on this host
(2 cores), plus process start and ``import torch``; a real model adds its build and GPU
warm-up, which the H200 cold start measures (the restart model's per-worker floor).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.ops.embedded import embedded_cluster  # noqa: E402
from lyra_ray.runtime.restart_phases import PHASES  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "resize_phases.json"
TRAIN = "lyra_ray.jobs.train_example:train_loop"


def _job(name: str, steps: int, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "total_steps": steps,
        "entrypoint": TRAIN,
        "throughput": {"v100": 1.0},
        "config": {"step_sleep_s": 0.05, "checkpoint_every": 20},
        **kw,
    }


def _wait(pred: Any, timeout: float, what: str, c: Any = None) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            jobs = [(j["name"], j["status"], j.get("assignment")) for j in c.list()] if c else []
            raise SystemExit(f"resize_phases: timed out waiting for {what}; jobs: {jobs}")
        time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=3, help="shrink+grow cycles (2 resizes each)")
    args = ap.parse_args()
    from lyra_ray.runtime.scheduler import start_scheduler
    from lyra_ray.sdk import Client

    t0 = time.monotonic()
    with embedded_cluster([("v100", 4)]) as live:
        start_scheduler({
            "policy": "tests.ray.elastic_policy:GreedyElastic", "round_s": 3600.0,
            "state_dir": str(live.workdir / "state"), "storage_path": str(live.workdir / "ckpt"),
            "period_s": 0.5, "grace_s": 60.0,
        })  # fmt: skip
        c = Client(live.address, token="")

        def records() -> list[dict[str, Any]]:
            rows = c.call("stats")["restart_phases"]
            return [r for r in rows if r["kind"] == "resize" and not r.get("interrupted")]

        def resized(to: int, after: int) -> bool:
            return any(r["to_workers"] == to for r in records()[after:])

        el = c.submit(_job("elastic", 10**6, min_workers=2, max_workers=4))
        _wait(lambda: (c.status(el)["assignment"] or {}).get("workers") == 4, 240, "grown to 4")
        _wait(lambda: c.status(el)["steps_done"] > 20, 240, "the elastic job stepping")
        for i in range(args.cycles):
            n = len(records())
            # long enough (30 s of steps) that the shrunk run steps before the grow
            rigid = c.submit(_job(f"rigid-{i}", 600, workers=2))
            _wait(lambda n=n: resized(2, n), 300, f"shrink {i + 1}", c)
            print(f"cycle {i + 1}: shrink {records()[-1]['total_s']:.1f} s", flush=True)
            _wait(lambda r=rigid: c.status(r)["status"] == "finished", 300, f"rigid-{i}", c)
            m = len(records())
            _wait(lambda m=m: resized(4, m), 300, f"grow {i + 1}", c)
            print(f"cycle {i + 1}: grow {records()[-1]['total_s']:.1f} s", flush=True)
        interrupted = [r for r in c.call("stats")["restart_phases"] if r.get("interrupted")]
        recs = records()
        c.cancel(el)
    med = {
        p: round(statistics.median(r["phases"][p] for r in recs if p in r["phases"]), 2)
        for p in PHASES
    }
    med["total_s"] = round(statistics.median(r["total_s"] for r in recs), 2)
    out = {
        "command": "benchmarks/resize_phases.py --cycles " + str(args.cycles),
        "host": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "cluster": "embedded: one node of 4 fake V100s; lyra_ray.jobs.train_example (tiny MLP)",
        "resizes": recs,
        "interrupted": interrupted,
        "median_s": med,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(" ".join(f"{k}={v}" for k, v in med.items()))
    print(f"wrote {OUT.relative_to(ROOT)}: {len(recs)} resizes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
