"""Load (issue #17, item 6): many SDK clients submitting at once across a scheduler restart,
then the scheduling cycle with that many jobs queued.

A real local cluster with one 1-GPU K80 node. One long job holds the GPU, so every
submission queues behind it (FIFO) and nothing else runs. ``--clients`` processes, each
its own Ray driver with its own ``lyra_ray.sdk.Client``, wait at a barrier, then submit
``--submissions`` jobs between them as fast as they can; when ``--restart-at`` of them
are accepted the scheduler actor is killed (Ray restarts it) and the clients' calls
retry through the SDK. Checked: every submission returned an id, no id twice, and the
scheduler holds each job exactly once. After ``--settle-s`` (the clients' processes
exit), ``--probe`` more jobs arrive one at a time, each a decision over all the queued
jobs, and the blocker's progress reports add cycles between them; the cycle time is
the scheduler's own
``stats()['cycle_s']`` (inbox, poll, core step, SQLite commit, apply), reported for the
cycles that ran with at least ``--submissions`` jobs queued.

    python benchmarks/chaos_load.py [--submissions 1000] [--clients 10] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))] if s else float("nan")


def queued_job(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "total_steps": 10,
        "workers": 1,
        "throughput": {"k80": 1.0},
        "entrypoint": "lyra_ray.jobs.train_example:train_loop",
    }


def client_main(
    address: str, me: int, count: int, ready: Any, go: Any, done: Any, results: Any
) -> None:
    """One SDK client in its own process: connect, wait for the start, submit ``count``."""
    sys.path.insert(0, str(ROOT))
    from lyra_ray.sdk import Client

    client = Client(address, retry_s=300.0)
    ready.put(me)
    go.wait()
    out = []
    for i in range(count):
        t0 = time.monotonic()
        jid = client.submit(queued_job(f"load-c{me:02d}-{i:04d}"))
        out.append((f"load-c{me:02d}-{i:04d}", jid, t0, time.monotonic()))
        with done.get_lock():
            done.value += 1
    results.put((me, out))


def run_load(
    address: str, submissions: int, clients: int, restart_at: float, kill: Any
) -> dict[str, Any]:
    """The concurrent part: returns what the clients saw (names, ids, times)."""
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    done = ctx.Value("i", 0)
    shares = [
        submissions // clients + (1 if c < submissions % clients else 0) for c in range(clients)
    ]
    procs = [
        ctx.Process(target=client_main, args=(address, c, n, ready, go, done, results))
        for c, n in enumerate(shares)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    t0 = time.monotonic()
    go.set()
    restarted_at = None
    while done.value < submissions and any(p.is_alive() for p in procs):
        if restarted_at is None and done.value >= restart_at * submissions:
            kill()
            restarted_at = time.monotonic() - t0
        time.sleep(0.05)
    got: list[tuple[str, str, float, float]] = []
    for _ in procs:
        got += results.get(timeout=600)[1]
    for p in procs:
        p.join(timeout=60)
    wall = max(x[3] for x in got) - t0
    return {"accepted": got, "wall_s": wall, "restart_at_s": restarted_at, "t0": t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--submissions", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--restart-at", type=float, default=0.5, help="fraction accepted at the kill")
    ap.add_argument("--probe", type=int, default=120, help="arrivals after the load")
    ap.add_argument("--probe-every", type=float, default=0.5, help="seconds between them")
    ap.add_argument("--settle-s", type=float, default=15.0, help="pause before the probes")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "chaos_load.json"))
    args = ap.parse_args(argv)
    out = measure(
        args.submissions,
        args.clients,
        args.restart_at,
        args.probe,
        args.policy,
        args.probe_every,
        args.settle_s,
    )
    out["command"] = "python benchmarks/chaos_load.py " + " ".join(argv or sys.argv[1:])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "cycles"}, indent=2))
    return 0 if out["exactly_once"] else 1


def measure(
    submissions: int,
    clients: int,
    restart_at: float,
    probe: int,
    policy: str,
    probe_every: float = 0.5,
    settle_s: float = 15.0,
) -> dict[str, Any]:
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-chaos-load-{os.getuid()}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from benchmarks._scratch_cluster import scratch_cluster
    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client

    with scratch_cluster([("k80", 1)]) as live:
        start_scheduler(
            {
                "policy": policy,
                "state_dir": str(live.workdir / "state"),
                "storage_path": str(live.workdir / "ckpt"),
                "period_s": 1.0,
            }
        )
        client = Client(live.address, retry_s=300.0)
        blocker = {**queued_job("blocker"), "total_steps": 10**6}
        blocker["config"] = {"step_sleep_s": 0.5, "checkpoint_every": 10**6}
        bid = client.submit(blocker)
        deadline = time.monotonic() + 300
        while client.status(bid)["steps_done"] < 1 and time.monotonic() < deadline:
            time.sleep(1.0)

        def kill() -> None:
            ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE), no_restart=False)

        load = run_load(live.address, submissions, clients, restart_at, kill)
        names = [n for n, _j, _a, _b in load["accepted"]]
        ids = [j for _n, j, _a, _b in load["accepted"]]
        listed = [j for j in client.list() if str(j["name"]).startswith("load-")]
        exactly_once = (
            len(names) == submissions
            and len(set(ids)) == submissions
            and sorted(j["name"] for j in listed) == sorted(names)
            and {j["id"] for j in listed} == set(ids)
        )
        # The clients' processes exit first: the cycles measured are the scheduler's own,
        # not ten drivers shutting down on the same two cores.
        time.sleep(settle_s)
        before = client.call("stats")
        first, first_commit = len(before["cycle_s"]), len(before["commits"])
        load_avg = os.getloadavg()
        for i in range(probe):  # decisions over all the queued jobs
            client.submit(queued_job(f"probe-{i}"))
            time.sleep(probe_every)
        time.sleep(2.0)
        stats = client.call("stats")
        stats["cycle_s"] = stats["cycle_s"][first:]
        stats["commits"] = stats["commits"][first_commit:]
        restarts = client.call("ping")["restarts"]
    busy = [c for c in stats["cycle_s"] if c["jobs"] >= submissions]
    secs = [c["cycle_s"] for c in busy]
    slow = [c for c in busy if c["cycle_s"] > 0.2]
    commits = [c for c in stats["commits"] if c["jobs"] >= submissions]
    return {
        "submissions": submissions,
        "clients": clients,
        "policy": policy,
        "wall_s": round(load["wall_s"], 2),
        "submissions_per_s": round(submissions / load["wall_s"], 1),
        "scheduler_restarted_at_s": round(load["restart_at_s"] or -1, 2),
        "scheduler_restarts": restarts,
        "accepted": len(names),
        "distinct_ids": len(set(ids)),
        "in_scheduler": len(listed),
        "exactly_once": exactly_once,
        "cycles_with_all_queued": len(secs),
        "cycle_p50_ms": round(1e3 * pct(secs, 50), 2),
        "cycle_p95_ms": round(1e3 * pct(secs, 95), 2),
        "cycle_p99_ms": round(1e3 * pct(secs, 99), 2),
        "cycles_over_200ms": len(slow),
        "load_average_1_5_15": [round(x, 2) for x in load_avg],
        "cycle_max_ms": round(1e3 * max(secs), 2) if secs else None,
        "core_step_p99_ms": round(1e3 * pct([c["step_s"] for c in busy], 99), 2),
        "commit_bytes_mean": round(statistics.fmean(c["bytes"] for c in commits))
        if commits
        else None,
        "commit_p99_ms": round(1e3 * pct([c["commit_s"] for c in commits], 99), 2),
        "cycles": busy,
    }


if __name__ == "__main__":
    sys.exit(main())
