"""Lina's p95 on the lyra-owned MoE service, under loans: popularity-based vs uniform replicas.

Run (with the live lock): ``flock /tmp/lyra-live.lock .venv/bin/python benchmarks/moe_serving.py``
(~7 min). Writes benchmarks/results/moe_serving.json; docs/moe.md's table renders from it.

Protocol (issue #31, item 4): one local cluster (a head, one training server, two inference
servers of 2 fake GPUs), the scheduler with the ``lyra`` policy, and the MoE service that
``lyra moe serve`` and ``lyra serve deploy`` deploy (``lyra_ray/serving/moe_app.py``), in two
arms one after the other with the same budget (serving GPUs x ``slots`` replicas per layer):

- **uniform**: every expert the same replicas (``uniform: 1``), no borrowing, no phase 2;
- **lina_counts**: Lina's replica counts (phase 1 on the load seen, phase 2 on drift every
  ``replan_s``), an expert's tokens on its own replicas only: popularity alone;
- **lina**: the same plus per-request borrowing (``moe_serving/dynamic.py``).

Each arm serves the same requests (explicit tokens, a Dirichlet topic mix each) open loop
through three phases: ``high`` (both servers serve), ``low`` (the scheduler lends one), and
``high`` again (it reclaims it), so servers are lent and reclaimed during the run. Every
device call takes the H200 expert-time model (``moe_serving/expert_time.py``) of its tokens
for a ``--cost-dim`` x ``--cost-hidden`` expert. Beside the measured p95 ratio: the ideal
ones of ``moe_serving/bottleneck.py`` for these requests' routes and both budgets.
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
ARMS = ("uniform", "lina_counts", "lina")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slots", type=int, default=3, help="expert replicas per layer per GPU")
    p.add_argument("--skew", type=float, default=1.5, help="Zipf exponent of the gate bias")
    p.add_argument("--batch", type=int, default=32, help="sequences per request")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence")
    p.add_argument("--cost-dim", type=int, default=4096, help="expert width the H200 time is of")
    p.add_argument("--cost-hidden", type=int, default=14336, help="its FFN hidden width")
    p.add_argument("--high-rps", type=float, default=5.0)
    p.add_argument("--low-rps", type=float, default=0.5)
    p.add_argument("--phase-s", type=float, default=25.0, help="seconds of each phase")
    p.add_argument("--replan-s", type=float, default=5.0, help="lina arm's phase-2 period")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "moe_serving.json"))
    return p


def service_spec(arm: str, args: argparse.Namespace) -> dict[str, Any]:
    lina = arm != "uniform"
    return {
        "name": f"moe-{arm.replace('_', '-')}",
        "model": "moe",
        "target_ongoing_per_replica": 0.1,
        "smoothing_s": 2.0,
        "down_after_s": 6.0,
        "config": {
            "slots": args.slots,
            "skew": args.skew,
            "seed": args.seed,
            "batch": args.batch,
            "seq": args.seq,
            "cost_dim": args.cost_dim,
            "cost_hidden": args.cost_hidden,
            "uniform": int(not lina),
            "borrow": int(arm == "lina"),
            "replan_s": args.replan_s if lina else 0.0,
        },
    }


def _plan(client: Any, name: str) -> dict[str, Any]:
    svcs = [s for s in client.overview()["serving"]["services"] if s["name"] == name]
    return dict(svcs[0].get("plan") or {}) if svcs else {}


def run_arm(client: Any, arm: str, args: argparse.Namespace, bodies: Any) -> dict[str, Any]:
    """Deploy the arm, warm it onto both servers, drive the phases, read its plans."""
    from benchmarks.moe.service_run import Phase, drive, latency_report
    from tests.ray.live_helpers import wait_until

    spec = service_spec(arm, args)
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
    t1, load1 = time.time(), os.getloadavg()[0]
    plan = _plan(client, spec["name"])
    client.remove_service(spec["name"])
    wait_until(lambda: not _plan(client, spec["name"]), 120, f"{arm} removed")
    replans = [r for r in plan.get("replans", []) if t0 <= r["at"] <= t1]
    return {
        "latency": latency_report(sent),
        "requests_sent": len(sent),
        "host_load_1m": [round(load0, 1), round(load1, 1)],
        "replans": [
            {
                "t_s": round(r["at"] - t0, 1),
                "reason": r["reason"],
                "budget_per_layer": r["budget_per_layer"],
                "counts": r["counts"],
            }
            for r in replans
        ],
        "lent_and_reclaimed": sorted({r["budget_per_layer"] for r in replans}),
        "sent_indices": [s.index for s in sent],
    }


def ideal(counts: Any, args: argparse.Namespace, devices: int) -> dict[str, Any]:
    """bottleneck.py's ideal ratios, uniform over Lina, for these requests on ``devices``."""
    import numpy as np

    from lyra_ray.moe_serving.bottleneck import ideal_report
    from lyra_ray.moe_serving.expert_time import ExpertCost
    from lyra_ray.serving.moe_plan import plan_devices

    tokens = counts.sum(0)
    base = plan_devices(np.ones_like(tokens), devices, args.slots).counts
    lina = plan_devices(tokens, devices, args.slots).counts
    cost = ExpertCost(args.cost_dim, args.cost_hidden, GPU)
    r = ideal_report(tokens, base, lina, len(counts), per_request=counts, expert=cost)
    roof = r["roofline"]
    return {
        "devices": devices,
        "uniform_counts": base.tolist(),
        "lina_counts": lina.tolist(),
        "tokens_busiest_replica": r["tokens"]["overall"],
        "h200_busiest_replica": roof["window"]["overall"],
        "h200_unloaded_p95_counts_only": roof["unloaded_request"]["p95"],
        "h200_unloaded_p95_borrow": roof["unloaded_request"]["borrow"]["p95"],
        "h200_unloaded_p95_uniform_ms": 1000 * roof["unloaded_request"]["p95_base"],
        "h200_unloaded_p95_lina_ms": 1000 * roof["unloaded_request"]["borrow"]["p95_plan"],
    }


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
    from lyra_ray.serving.spec import moe_knobs, parse_service_spec

    for arm in ARMS:
        parse_service_spec(service_spec(arm, args))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_TMPDIR", "/tmp/ray-lyra-bench")
    from benchmarks.moe.service_run import sample_requests
    from lyra_ray.ops.embedded import embedded_cluster
    from lyra_ray.sdk import Client
    from tests.ray.live_helpers import start_lending_scheduler

    knobs = moe_knobs(service_spec("lina", args)["config"])
    n = int(args.high_rps * args.phase_s * 2 + args.low_rps * args.phase_s * 1.5 + 50)
    bodies, counts = sample_requests(knobs, n, args.batch, args.seq, args.seed + 1)
    started = time.time()
    arms: dict[str, Any] = {}
    with embedded_cluster([(GPU, 2)], [(GPU, 2), (GPU, 2)]) as live:
        start_lending_scheduler(live.workdir)
        client = Client(live.address)
        for arm in ARMS:
            arms[arm] = run_arm(client, arm, args, bodies)
            print(f"{arm}: {json.dumps(arms[arm]['latency'])}")
    sent = counts[[i % n for i in arms["lina"]["sent_indices"]]]
    for arm in ARMS:
        arms[arm].pop("sent_indices")
    u = arms["uniform"]["latency"]

    def ratio(b: dict[str, Any], p: str) -> float | None:
        return u[p]["p95_ms"] / b[p]["p95_ms"] if u[p]["p95_ms"] and b[p]["p95_ms"] else None

    measured = {a: {p: ratio(arms[a]["latency"], p) for p in u} for a in ARMS[1:]}
    result = {
        "command": "flock /tmp/lyra-live.lock .venv/bin/python benchmarks/moe_serving.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "wall_s": round(time.time() - started, 1),
        "cost_model": f"H200 expert-time model (moe_serving/expert_time.py, fitted in "
        f"benchmarks/results/moe_expert_fit.json) of each call's tokens, for a "
        f"{args.cost_dim}x{args.cost_hidden} expert",
        "setup": {
            **{k: v for k, v in vars(args).items() if k != "json"},
            "experts": knobs["experts"],
            "layers": knobs["layers"],
            "inference_servers": "2 x 2 fake GPUs",
            "tokens_per_request": args.batch * args.seq,
        },
        "arms": arms,
        "measured_p95_ratio": measured,
        "ideal": {"both_servers": ideal(sent, args, 4), "one_server": ideal(sent, args, 2)},
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"measured p95 uniform/lina: {measured}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
