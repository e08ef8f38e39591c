"""The price of a resize, measured on a local cluster: where each resize's time goes,
warm workers against the Ray Train path, side by side in one process.

One embedded Ray cluster (one node of four fake V100s) and the live scheduler with a
small greedy elastic policy. An elastic job (2-4 workers, the example model) runs beside
short rigid jobs: each rigid arrival shrinks it to 2 workers, each rigid finish grows it
back to 4, so every cycle is two real resizes. The runtime records each resize's phases
from the scheduler's decision to the first step at the new size
(``lyra_ray/runtime/restart_phases.py``). Five runs, one after the other on the same
cluster, each with a scheduler of its own:

* ``baseline``: the ``ray_train`` executor (a ``TorchTrainer.fit()`` per generation: the
  path before #47); and ``baseline_fast_poll``, the same with Ray Train's controller
  polling its workers every 0.1 s instead of 2 s (``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``,
  its knob that a stop waits on);
* ``warm`` (what ``median_s`` and ``lyra_ray/model/restart_cost.py`` take): the default
  executor, each job's gang of warm workers;
* ``state_200mb``: the same job carrying 200 MB of state (``state_mb``) in every
  checkpoint, warm;
* ``cold_grow``: warm, but a worker that leaves ends at once (``spare_ttl_s`` tiny), so
  every grow starts new processes: a grow onto a node where no warm worker waits.

Writes ``benchmarks/results/resize_phases.json`` with every record, each phase's median
per run, the ratio of the baseline's median to the warm one's, the host's load average
around each run, and where a start's time went (the gang's own stamps; Ray Train's
controller log for the baseline).

    flock /tmp/lyra-live.lock nice -n 10 .venv/bin/python benchmarks/resize_phases.py

Fake GPUs and a tiny model: the phases are Ray's and lyra's own overheads on this host
(2 cores, shared), plus process start and ``import torch``; a real model adds its build
and GPU warm-up, which the H200 cold start measures (the restart model's per-worker floor).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._resize_probe import breakdown  # noqa: E402
from benchmarks._scratch_cluster import scratch_cluster  # noqa: E402
from lyra_ray.ops.embedded import EmbeddedCluster  # noqa: E402
from lyra_ray.runtime.restart_phases import PHASES  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "resize_phases.json"
TRAIN = "lyra_ray.jobs.train_example:train_loop"
TIMED = "benchmarks._resize_probe:train_loop"
"""The elastic job: the example loop, its StepLoop stamping its own moments."""
POLICY = "tests.ray.elastic_policy:GreedyElastic"


def _job(name: str, steps: int, config: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "total_steps": steps,
        "entrypoint": TIMED if config and "probe_log" in config else TRAIN,
        "throughput": {"v100": 1.0},
        "config": {"step_sleep_s": 0.05, "checkpoint_every": 20, **(config or {})},
        **kw,
    }


def _wait(pred: Callable[[], bool], timeout: float, what: str, c: Any) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            jobs = [
                (j["name"], j["status"], j.get("assignment"), j.get("reason")) for j in c.list()
            ]
            raise SystemExit(f"resize_phases: timed out waiting for {what}; jobs: {jobs}")
        time.sleep(0.25)


def _medians(recs: list[dict[str, Any]]) -> dict[str, float]:
    med = {
        p: round(statistics.median(r["phases"][p] for r in recs if p in r["phases"]), 2)
        for p in PHASES
        if any(p in r["phases"] for r in recs)
    }
    med["total_s"] = round(statistics.median(r["total_s"] for r in recs), 2)
    for kind, to in (("shrink", 2), ("grow", 4)):
        these = [r["total_s"] for r in recs if r["to_workers"] == to]
        if these:
            med[f"{kind}_total_s"] = round(statistics.median(these), 2)
    return med


def _start(live: EmbeddedCluster, n: int, **cfg: Any) -> Any:
    """A fresh scheduler (the last one killed first) with its own state directory."""
    import ray

    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client

    try:
        ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE), no_restart=True)
    except ValueError:
        pass
    else:
        for _ in range(240):
            try:
                ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.25)
    start_scheduler(
        {
            "policy": POLICY,
            "round_s": 3600.0,
            "state_dir": str(live.workdir / f"state-{n}"),
            "storage_path": str(live.workdir / f"ckpt-{n}"),
            "period_s": 0.5,
            "grace_s": 60.0,
            **cfg,
        }
    )
    return Client(live.address, token="")


def _gang_events(job_id: str) -> list[dict[str, Any]]:
    import ray

    from lyra_ray.contract.names import NAMESPACE, gang_actor_name

    try:
        gang = ray.get_actor(gang_actor_name(job_id), namespace=NAMESPACE)
    except ValueError:
        return []
    return list(ray.get(gang.info.remote())["events"])


def run(
    live: EmbeddedCluster,
    n: int,
    cycles: int,
    rigid_steps: int,
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    **cfg: Any,
) -> dict[str, Any]:
    """``cycles`` shrink+grow cycles of an elastic job under a scheduler of its own
    (``env``: the job's environment variables, through its runtime env)."""
    t0, load0 = time.monotonic(), os.getloadavg()
    c = _start(live, n, **cfg)
    probe = live.workdir / f"probe-{n}.jsonl"
    config = {**(config or {}), "probe_log": str(probe)}

    def records() -> list[dict[str, Any]]:
        rows = c.call("stats")["restart_phases"]
        return [r for r in rows if r["kind"] == "resize" and r["job_id"] == el]

    def resized(to: int, after: int) -> bool:
        return any(r["to_workers"] == to and not r.get("interrupted") for r in records()[after:])

    extra: dict[str, Any] = {"runtime_env": {"env_vars": env}} if env else {}
    el = c.submit(_job("elastic", 10**6, config, min_workers=2, max_workers=4, **extra))
    _wait(lambda: (c.status(el)["assignment"] or {}).get("workers") == 4, 300, "grown to 4", c)
    _wait(lambda: c.status(el)["steps_done"] > 20, 300, "the elastic job stepping", c)
    for i in range(cycles):
        seen = len(records())
        # long enough that the shrunk run steps before the grow (else the shrink's
        # record closes as interrupted, without its last phases)
        rigid = c.submit(_job(f"rigid-{n}-{i}", rigid_steps, workers=2))
        _wait(lambda s=seen: resized(2, s), 300, f"shrink {i + 1}", c)
        print(f"  cycle {i + 1}: shrink {records()[-1]['total_s']:.1f} s", flush=True)
        _wait(lambda r=rigid: c.status(r)["status"] == "finished", 300, f"rigid-{i}", c)
        seen = len(records())
        _wait(lambda s=seen: resized(4, s), 300, f"grow {i + 1}", c)
        print(f"  cycle {i + 1}: grow {records()[-1]['total_s']:.1f} s", flush=True)
    recs = records()
    events = _gang_events(el)
    c.cancel(el)
    _wait(lambda: c.status(el)["status"] == "cancelled", 120, "the elastic job cancelled", c)
    done = [r for r in recs if not r.get("interrupted")]
    stamps = [json.loads(line) for line in probe.read_text().splitlines() if line.strip()]
    return {
        "config": dict(cfg)
        | {"job_config": {k: v for k, v in config.items() if k != "probe_log"}, "env": env or {}},
        "resizes": done,
        "interrupted": [r for r in recs if r.get("interrupted")],
        "median_s": _medians(done),
        "breakdown": breakdown(done, stamps),
        "starts": events,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.monotonic() - t0, 1),
    }


def controller_breakdown(logs: Path) -> list[str]:
    """Ray Train's own account of each worker group start (its controller's debug log)."""
    out: list[str] = []
    for f in sorted((logs / "train").glob("ray-train-sys-controller-*.log")):
        for line in f.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = str(rec.get("message", ""))
            if "[Worker Group Initialization]" in msg or "Shutting down" in msg:
                out.append(f"{rec.get('asctime', '')} {msg.splitlines()[0]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=3, help="shrink+grow cycles (2 resizes each)")
    ap.add_argument(
        "--extra-cycles", type=int, default=2, help="cycles of the 200 MB and cold runs"
    )
    ap.add_argument("--no-baseline", action="store_true", help="skip the ray_train run")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    t0 = time.monotonic()
    out: dict[str, Any] = {
        "command": "benchmarks/resize_phases.py"
        + (f" --cycles {args.cycles}" if args.cycles != 3 else "")
        + (f" --extra-cycles {args.extra_cycles}" if args.extra_cycles != 2 else "")
        + (" --no-baseline" if args.no_baseline else ""),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        },
        "cluster": "embedded: one node of 4 fake V100s; lyra_ray.jobs.train_example (tiny MLP)",
    }
    with scratch_cluster([("v100", 4)]) as live:
        runs: dict[str, dict[str, Any]] = {}
        if not args.no_baseline:
            print("baseline (ray_train):", flush=True)
            runs["baseline"] = run(live, 1, args.cycles, 600, executor="ray_train")
            logs = Path(live.cluster.head_node.get_logs_dir_path())
            runs["baseline"]["starts"] = controller_breakdown(logs)
            # Ray Train's own knob: its controller polls the workers every 2 s, and a
            # stop waits for two polls (the last report's queue, then the loop's end)
            print("baseline, Ray Train polling every 0.1 s:", flush=True)
            poll = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1"}
            runs["baseline_fast_poll"] = run(
                live, 5, args.extra_cycles, 600, env=poll, executor="ray_train"
            )
        print("warm:", flush=True)
        runs["warm"] = run(live, 2, args.cycles, 200)
        print("state_200mb (warm):", flush=True)
        runs["state_200mb"] = run(live, 3, args.extra_cycles, 200, {"state_mb": 200})
        print("cold_grow (warm, no spares):", flush=True)
        runs["cold_grow"] = run(live, 4, args.extra_cycles, 200, spare_ttl_s=0.01)
    warm = runs["warm"]
    out |= {
        "resizes": warm["resizes"],
        "interrupted": warm["interrupted"],
        "median_s": warm["median_s"],
        "runs": runs,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    if "baseline" in runs:
        base = runs["baseline"]["median_s"]["total_s"]
        out["baseline_over_warm"] = round(base / warm["median_s"]["total_s"], 2)
    out["host"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    for name, r in runs.items():
        print(name, " ".join(f"{k}={v}" for k, v in r["median_s"].items()))
    if "baseline_over_warm" in out:
        print(f"baseline / warm (median total): {out['baseline_over_warm']}x")
    print(f"wrote {args.out}: {len(warm['resizes'])} warm resizes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
