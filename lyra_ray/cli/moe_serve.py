"""``lyra moe serve``: the lyra-owned MoE service, with traffic whose topic mix shifts.

WHY the scheduler's service and no app of its own: there is one MoE service, the one
the scheduler owns on the inference pool (``lyra_ray/serving/moe_app.py``); it is the one
lyra lends and reclaims servers under and re-plans on drift, so it is the one a demo and a
benchmark must run. This command deploys it through the scheduler like ``lyra serve
deploy`` would, then sends open-loop HTTP traffic whose topic mix moves to another topic
every ``--shift-every`` seconds, and prints the plan after each period: its replica counts
and the re-plans (phase 1 on a lend or reclaim, phase 2 on drift) made meanwhile.

Where it runs: on the cluster ``--address`` or ``RAY_ADDRESS`` names (its scheduler
deploys the service, which stays after the command: ``lyra serve remove NAME``), else on a
cluster of its own on this host (a head, one training server and the ``--inference`` pool,
fake GPUs, the ``lyra`` policy), shut down at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from lyra_ray.model.errors import InputError

TOPICS = 4
"""The model's topics (``MoEConfig.topics``); each period's traffic is one of them."""


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``lyra moe serve``."""
    p.add_argument("--name", default="moe", help="service name")
    p.add_argument("--inference", default="h200=2x2", help="local inference pool (TYPE=NxG)")
    p.add_argument("--address", default=None, help="a running lyra cluster (else RAY_ADDRESS)")
    p.add_argument(
        "--arch", default="mixtral", help="transformers model type (mixtral, qwen2_moe, ...)"
    )
    p.add_argument("--layers", type=int, default=2, help="MoE layers")
    p.add_argument("--experts", type=int, default=4, help="experts per layer")
    p.add_argument("--top-k", type=int, default=1, help="experts per token")
    p.add_argument("--slots", type=int, default=3, help="expert replicas per layer per GPU")
    p.add_argument("--skew", type=float, default=1.0, help="Zipf popularity the routers get")
    p.add_argument(
        "--popularity",
        default=None,
        help='a load file {"logical_count": [[...]]} (e.g. DeepSeek-V3\'s) whose popularity, '
        "mapped onto the model's experts, the routers are calibrated to (instead of --skew)",
    )
    p.add_argument("--batch", type=int, default=4, help="sequences per sampled request")
    p.add_argument("--seq", type=int, default=16, help="tokens per sampled sequence")
    p.add_argument(
        "--emulate", action="store_true", help="calls take the H200 model's time (GPU-like)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replan-s", type=float, default=5.0, help="phase-2 check period")
    p.add_argument("--replan-gain", type=float, default=0.1, help="least bottleneck gain")
    p.add_argument("--replan-checks", type=int, default=2, help="checks in a row to re-plan")
    p.add_argument("--threshold", type=float, default=0.2, help="phase-2 share deviation")
    p.add_argument("--uniform", action="store_true", help="equal replicas per expert")
    p.add_argument("--no-borrow", action="store_true", help="no per-request borrowing")
    p.add_argument("--rps", type=float, default=5.0, help="requests per second")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of traffic")
    p.add_argument("--shift-every", type=float, default=20.0, help="seconds per topic")
    p.add_argument(
        "--ready-s",
        type=float,
        default=300.0,
        help="longest wait for the service's first server before any traffic",
    )


def service_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The service the flags describe, checked as ``lyra serve deploy`` checks a file."""
    from lyra_ray.serving.spec import parse_service_spec

    if not (args.duration > 0 and args.shift_every > 0 and args.rps > 0):
        raise InputError("--duration, --shift-every and --rps: must be > 0")
    if not (math.isfinite(args.ready_s) and args.ready_s > 0):
        raise InputError(f"--ready-s: a finite number of seconds > 0, got {args.ready_s}")
    config: dict[str, Any] = {
        "arch": args.arch,
        "layers": args.layers,
        "experts": args.experts,
        "top_k": args.top_k,
        "slots": args.slots,
        "skew": args.skew,
        "batch": args.batch,
        "seq": args.seq,
        "emulate": int(args.emulate),
        "seed": args.seed,
    }
    if args.popularity:
        config["target_load"] = popularity_target(
            args.popularity, args.layers, args.experts, args.top_k, args.seed
        )
    spec = {
        "name": args.name,
        "model": "moe",
        "config": {
            **config,
            "replan_s": args.replan_s,
            "replan_gain": args.replan_gain,
            "replan_checks": args.replan_checks,
            "threshold": args.threshold,
            "uniform": int(args.uniform),
            "borrow": int(not args.no_borrow),
        },
    }
    try:
        parse_service_spec(spec)
    except InputError as e:  # name the flag, not the spec field
        raise InputError(f"{e} (a flag of `lyra moe serve`)") from None
    return spec


def popularity_target(path: str, layers: int, experts: int, top_k: int, seed: int) -> Any:
    """A load file's popularity mapped onto the served model's experts (``target_load``)."""
    from lyra_ray.moe_serving.plan_io import LoadFileError, read_load_file
    from lyra_ray.moe_serving.popularity_map import mapped_shares

    try:
        load, _ = read_load_file(path)
        return mapped_shares(load, layers, experts, top_k, seed).tolist()
    except (LoadFileError, ValueError) as e:
        raise InputError(f"--popularity {e}") from None


def serve_main(args: argparse.Namespace) -> int:
    spec = service_spec(args)
    address = args.address or os.environ.get("RAY_ADDRESS")
    if address:
        from lyra_ray.sdk import Client

        if not _drive(Client(address), spec, args):
            print(f"moe serve: {_no_server(args)}; service {args.name} is left deployed")
            return 1
        print(
            f"moe serve: done after {args.duration:.0f} s; service {args.name} keeps running "
            f"(`lyra serve remove {args.name}` removes it)"
        )
        return 0
    from lyra_ray.client.quiet import init_ray, verbose
    from lyra_ray.ops.embedded import embedded_cluster
    from lyra_ray.ops.local import parse_nodes
    from lyra_ray.ops.ports import free_port
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client

    pool = [(t, g) for t, n, g in parse_nodes(args.inference, "--inference") for _ in range(n)]
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with embedded_cluster(training=[(pool[0][0], pool[0][1])], inference=pool) as live:
        if verbose():  # the embedded cluster connects quietly; -v asks for Ray's lines
            import ray

            ray.shutdown()
            init_ray(live.address)
        start_scheduler(
            {
                "policy": "lyra",
                "state_dir": str(live.workdir / "state"),
                "storage_path": str(live.workdir / "ckpt"),
                "period_s": 0.5,
                "serve_port": free_port(),
            }
        )
        served = _drive(Client(live.address), spec, args)
    if not served:
        print(f"moe serve: {_no_server(args)}; the cluster it started is shut down")
        return 1
    print(f"moe serve: done after {args.duration:.0f} s; the cluster it started is shut down")
    return 0


def _no_server(args: argparse.Namespace) -> str:
    return f"service {args.name} got no server within {args.ready_s:.0f} s, no traffic sent"


READY_POLL_S = 0.5


def wait_for_first_server(
    plan_of: Callable[[], Mapping[str, Any]],
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """Seconds until the service's plan holds a device, None if not within ``timeout_s``.

    WHY before any traffic: a freshly deployed MoE service has no server until the pool
    deploys its backend on one (a Serve app whose replicas start processes and import
    PyTorch), and requests sent before then wait for it. On a loaded host that took over
    60 s, and every request of a 6-s run timed out (the suite under a one-core CPU hog,
    2026-12-02): the traffic measured the service's cold start, not the service."""
    start = clock()
    while True:
        if int(plan_of().get("devices") or 0) > 0:
            return clock() - start
        if clock() - start >= timeout_s:
            return None
        sleep(READY_POLL_S)


def _drive(client: Any, spec: dict[str, Any], args: argparse.Namespace) -> bool:
    """Deploy, wait for its first server, then one period of traffic per topic in turn,
    printing the plan after each. False if no server came (and no traffic was sent)."""
    from lyra_ray.serving.load import run_load
    from lyra_ray.serving.load_pattern import LoadPattern

    url = client.deploy_service(spec)
    print(f"service {args.name} (MoE, lyra-owned): {url}")
    waited = wait_for_first_server(lambda: _plan(client, args.name), args.ready_s)
    if waited is None:
        return False
    print(f"    first server up after {waited:.1f} s")
    seen = 0.0
    periods = max(1, math.ceil(args.duration / args.shift_every))
    for i in range(periods):
        length = min(args.shift_every, args.duration - i * args.shift_every)
        topic = i % TOPICS
        body = {"topics": [1 if t == topic else 0 for t in range(TOPICS)]}
        pattern = LoadPattern(kind="constant", peak_rps=args.rps, duration_s=length)
        rep = run_load(url, pattern, seed=args.seed + i, timeout_s=60.0, json_body=body)
        plan = _plan(client, args.name)
        p50 = f"{rep.p50_ms:.0f}" if rep.p50_ms is not None else "-"
        print(
            f"[topic {topic}] {rep.succeeded}/{rep.count} ok, p50 {p50} ms; "
            f"{plan.get('devices', 0)} GPUs, replicas per expert {plan.get('counts')}"
        )
        for r in [r for r in plan.get("replans", []) if r["at"] > seen]:
            print(f"    re-plan: {r['reason']} -> {r['counts']}")
            seen = r["at"]
        if rep.failed:
            print(f"    failed: {rep.failures_by_reason}", file=sys.stderr)
    return True


def _plan(client: Any, name: str) -> dict[str, Any]:
    svcs = [s for s in client.overview()["serving"]["services"] if s["name"] == name]
    return dict(svcs[0].get("plan") or {}) if svcs else {}


def register(subparsers: Any) -> None:
    """`lyra moe plan` (``lyra_ray.moe_serving.cli``) and `lyra moe serve` (here)."""
    from lyra_ray.moe_serving.cli import register as register_plan

    sub = register_plan(subparsers)
    serve = sub.add_parser("serve", help="deploy the lyra-owned MoE service and drive traffic")
    add_serve_args(serve)
    serve.set_defaults(func=serve_main)
