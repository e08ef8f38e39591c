"""Popularity-based vs uniform expert placement on the lyra MoE service, serving a real
architecture (``transformers``' Mixtral, random weights), under skewed routing and loans.

Run (with the live lock): ``flock /tmp/lyra-live.lock .venv/bin/python benchmarks/moe_serving.py``
(~7 min). Writes benchmarks/results/moe_serving.json; docs/moe.md's table renders from it.

Protocol (issue #46, item 5): one local cluster (a head, one training server, two inference
servers of 2 fake GPUs), the scheduler with the ``lyra`` policy, and the MoE service that
``lyra moe serve`` and ``lyra serve deploy`` deploy (``lyra_ray/serving/moe_app.py``). Its
devices *compute* their experts (each expert's slice of the model's fused tensors, numpy
on this host's CPUs; no emulated time). The routers are calibrated to DeepSeek-V3's
measured popularity (``--popularity``, mapped onto the model's experts by rank groups,
``moe_serving/popularity_map.py``). Arms, one after the other, with the same budget
(serving GPUs x ``slots`` replicas per layer):

- **uniform**: every expert the same replicas (``uniform: 1``), no borrowing, no phase 2;
- **popularity**: the plan for the batch regime the service sees (``plan_for_regime``,
  under the devices' measured expert time), phase 2 on drift, no borrowing;
- **popularity + borrowing**: the same plus per-request borrowing (``dynamic.py``).

Each arm serves the same requests (explicit tokens, a Dirichlet topic mix each) open loop
through three phases: ``high`` (both servers serve), ``low`` (the scheduler lends one), and
``high`` again (it reclaims it), so a server is lent and reclaimed during the run; then a
closed-loop phase on both servers (``--clients`` senders back to back) gives throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXIT_BAD_INPUT = 2
GPU = "h200"
ARMS = ("uniform", "popularity", "popularity_borrow")
DEFAULT_POPULARITY = ROOT / ".." / "shared" / "data" / "moe"
DEFAULT_POPULARITY = DEFAULT_POPULARITY / "deepseek_v3_expert_load_prefill_in1024.json"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arch", default="mixtral", help="transformers model type")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--dim", type=int, default=64, help="hidden size")
    p.add_argument("--hidden", type=int, default=512, help="an expert's intermediate size")
    p.add_argument("--slots", type=int, default=4, help="expert replicas per layer per GPU")
    p.add_argument("--popularity", default=str(DEFAULT_POPULARITY), help="a load file")
    p.add_argument("--batch", type=int, default=8, help="sequences per request")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence")
    p.add_argument("--high-rps", type=float, default=4.0)
    p.add_argument("--low-rps", type=float, default=0.4)
    p.add_argument("--phase-s", type=float, default=20.0, help="seconds of each phase")
    p.add_argument("--clients", type=int, default=4, help="closed-loop senders")
    p.add_argument("--saturate-s", type=float, default=15.0, help="closed-loop seconds")
    p.add_argument("--replan-s", type=float, default=5.0, help="phase-2 period")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "moe_serving.json"))
    return p


def service_spec(arm: str, args: argparse.Namespace, target: list[list[float]]) -> dict[str, Any]:
    popular = arm != "uniform"
    return {
        "name": f"moe-{arm.replace('_', '-')}",
        "model": "moe",
        "target_ongoing_per_replica": 0.1,
        "smoothing_s": 2.0,
        "down_after_s": 6.0,
        "config": {
            "arch": args.arch,
            "layers": args.layers,
            "experts": args.experts,
            "top_k": args.top_k,
            "dim": args.dim,
            "hidden": args.hidden,
            "slots": args.slots,
            "seed": args.seed,
            "batch": args.batch,
            "seq": args.seq,
            "target_load": target,
            "uniform": int(not popular),
            "borrow": int(arm == "popularity_borrow"),
            "replan_s": args.replan_s if popular else 0.0,
        },
    }


def _plan(client: Any, name: str) -> dict[str, Any]:
    svcs = [s for s in client.overview()["serving"]["services"] if s["name"] == name]
    return dict(svcs[0].get("plan") or {}) if svcs else {}


def run_arm(
    client: Any, arm: str, args: argparse.Namespace, bodies: Any, target: Any
) -> dict[str, Any]:
    """Deploy the arm, warm it onto both servers, drive the phases, read its plans."""
    from benchmarks.moe.service_run import Phase, drive, latency_report, saturate
    from tests.ray.live_helpers import wait_until

    spec = service_spec(arm, args, target)
    url = client.deploy_service(spec)
    warm = [Phase("warm", args.high_rps, 10.0)]
    for _ in range(12):  # until both servers serve (a reclaim takes a few seconds)
        drive(url, bodies, warm, args.seed + 99)
        if _plan(client, spec["name"]).get("devices") == 4:
            break
    else:
        raise RuntimeError(f"{arm}: never served on both servers")
    phases = [
        Phase("high", args.high_rps, args.phase_s),
        Phase("low", args.low_rps, 1.5 * args.phase_s),
        Phase("high_again", args.high_rps, args.phase_s),
    ]
    t0, load0 = time.time(), os.getloadavg()[0]
    sent = drive(url, bodies, phases, args.seed)
    t1 = time.time()
    devices_before = _plan(client, spec["name"]).get("devices")
    closed = saturate(url, bodies, args.clients, args.saturate_s, len(sent))
    done = [s for s in closed if s.latency_ms is not None]
    load1 = os.getloadavg()[0]
    plan = _plan(client, spec["name"])
    client.remove_service(spec["name"])
    wait_until(lambda: not _plan(client, spec["name"]), 120, f"{arm} removed")
    replans = [r for r in plan.get("replans", []) if t0 <= r["at"] <= t1]
    return {
        "latency": latency_report(sent + closed),
        "requests_sent": len(sent),
        "throughput": {
            "clients": args.clients,
            "seconds": args.saturate_s,
            "devices": [devices_before, plan.get("devices")],
            "completed": len(done),
            "req_per_s": len(done) / args.saturate_s,
            "tokens_per_s": len(done) * args.batch * args.seq / args.saturate_s,
        },
        "host_load_1m": [round(load0, 1), round(load1, 1)],
        "model": plan.get("model"),
        "regime": plan.get("regime"),
        "replans": [
            {
                "t_s": round(r["at"] - t0, 1),
                "reason": r["reason"],
                "budget_per_layer": r["budget_per_layer"],
                "replicas_per_layer": r.get("replicas_per_layer"),
                "counts": r["counts"],
            }
            for r in replans
        ],
        "lent_and_reclaimed": sorted({r["budget_per_layer"] for r in replans}),
        "sent_indices": [s.index for s in sent],
    }


def ideal(counts: Any, base: Any, plan: Any) -> dict[str, Any]:
    """``bottleneck.py``'s token-only ideal: busiest replica's tokens, uniform over the
    popularity arm's counts, for these requests (no CPU contention, no call overheads)."""
    import numpy as np

    from lyra_ray.moe_serving.bottleneck import ideal_report

    tokens = counts.sum(0)
    r = ideal_report(tokens, np.asarray(base), np.asarray(plan), len(counts), per_request=counts)
    return {
        "uniform_counts": np.asarray(base).tolist(),
        "popularity_counts": np.asarray(plan).tolist(),
        "tokens_busiest_replica": r["tokens"]["overall"],
        "unloaded_p95_tokens": r["unloaded_request"]["p95"],
    }


def _counts_at(arm: dict[str, Any], budget: int) -> Any:
    """The arm's replica counts at its last re-plan with this budget (None: none)."""
    rows = [r["counts"] for r in arm["replans"] if r["budget_per_layer"] == budget]
    return rows[-1] if rows else None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.json)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".probe").write_text("")
        out.with_suffix(".probe").unlink()
    except OSError as e:
        print(f"moe_serving.py: error: --json {out}: cannot write ({e})", file=sys.stderr)
        return EXIT_BAD_INPUT
    from lyra_ray.cli.moe_serve import popularity_target
    from lyra_ray.model.errors import InputError
    from lyra_ray.serving.spec import moe_knobs, parse_service_spec

    try:
        target = popularity_target(
            args.popularity, args.layers, args.experts, args.top_k, args.seed
        )
        for arm in ARMS:
            parse_service_spec(service_spec(arm, args, target))
    except InputError as e:
        print(f"moe_serving.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_TMPDIR", "/tmp/ray-lyra-bench")
    from benchmarks._scratch_cluster import scratch_cluster
    from benchmarks.moe.service_run import sample_requests
    from lyra_ray.sdk import Client
    from tests.ray.live_helpers import start_lending_scheduler

    knobs = moe_knobs(service_spec("popularity", args, target)["config"])
    n = int(args.high_rps * args.phase_s * 2 + args.low_rps * args.phase_s * 1.5 + 50)
    bodies, counts = sample_requests(knobs, n, args.batch, args.seq, args.seed + 1)
    started = time.time()
    arms: dict[str, Any] = {}
    with scratch_cluster([(GPU, 2)], [(GPU, 2), (GPU, 2)]) as live:
        start_lending_scheduler(live.workdir)
        client = Client(live.address)
        for arm in ARMS:
            arms[arm] = run_arm(client, arm, args, bodies, target)
            print(f"{arm}: {json.dumps(arms[arm]['latency'])} {arms[arm]['throughput']}")
    sent = counts[[i % n for i in arms["popularity"]["sent_indices"]]]
    for arm in ARMS:
        arms[arm].pop("sent_indices")
    u = arms["uniform"]["latency"]

    def ratio(b: dict[str, Any], p: str) -> float | None:
        return u[p]["p95_ms"] / b[p]["p95_ms"] if u[p]["p95_ms"] and b[p]["p95_ms"] else None

    phases = [p for p in u if p != "saturated"]
    measured = {a: {p: ratio(arms[a]["latency"], p) for p in phases} for a in ARMS[1:]}
    thr = arms["uniform"]["throughput"]["req_per_s"]
    throughput = {a: arms[a]["throughput"]["req_per_s"] / thr for a in ARMS[1:]} if thr else {}
    ideals = {}
    for key, budget in (("both_servers", 4 * args.slots), ("one_server", 2 * args.slots)):
        base = _counts_at(arms["uniform"], budget)
        plan = _counts_at(arms["popularity"], budget)
        if base is not None and plan is not None:
            ideals[key] = ideal(sent, base, plan)
    result = {
        "command": "flock /tmp/lyra-live.lock .venv/bin/python benchmarks/moe_serving.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "device_time": "computed: each device runs its experts' slices in numpy on this "
        "host's CPUs (no emulated GPU time)",
        "setup": {
            **{k: v for k, v in vars(args).items() if k != "json"},
            "popularity": Path(args.popularity).name,
            "target_load": target,
            "inference_servers": "2 x 2 fake GPUs",
            "tokens_per_request": args.batch * args.seq,
            "cpus": os.cpu_count(),
        },
        "arms": arms,
        "measured_p95_ratio": measured,
        "measured_throughput_ratio": throughput,
        "ideal": ideals,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"p95 uniform/popularity: {measured}; throughput: {throughput}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
