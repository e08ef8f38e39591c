"""`lyra moe {plan,serve}` — registered into the lead's `lyra` CLI via ``register``.

Standalone too:
``python -m lyra_ray.moe_serving.cli moe plan --load FILE --gpus 32 --replicas 288``.
Bad input exits with code 2 and a message naming the file or flag, never a traceback.
The serving benchmark is a script, benchmarks/moe_serving.py: measurement code stays out of
the package.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from lyra_ray.moe_serving.plan_io import (
    ALGORITHMS,
    LoadFileError,
    check_budget,
    planner_for,
    read_load_file,
    report,
    timed_plan,
)

EXIT_BAD_INPUT = 2


def _fail(msg: str) -> int:
    print(f"lyra moe: error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_plan(args: argparse.Namespace) -> int:
    """Plan replicas for a load file and report max/mean device load."""
    try:
        load, layers = read_load_file(args.load)
    except LoadFileError as e:
        return _fail(f"--load {e}")
    msg = check_budget(load.shape[1], args.gpus, args.replicas, args.slots)
    if msg:
        return _fail(msg)
    try:
        nodes = args.nodes if args.nodes is not None else max(1, args.gpus // 8)
        fn = planner_for(args.algorithm, args.gpus, args.replicas, args.slots, args.groups, nodes)
        plan, plan_s = timed_plan(fn, load)
    except ValueError as e:
        return _fail(str(e))
    out: dict[str, Any] = {"algorithm": args.algorithm, "load": str(args.load)}
    out.update(report(load, layers, plan, plan_s))
    if args.json:
        try:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2))
        except OSError as e:
            return _fail(f"--json {args.json}: cannot write ({e})")
    print(
        f"{args.algorithm}: max/mean device load {out['max_over_mean']:.4f} "
        f"(worst layer {out['max_over_mean_worst']:.4f}) over {out['moe_layers']} layers, "
        f"planned in {plan_s * 1e3:.1f} ms"
    )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Deploy the MoE app on a private local cluster, send traffic, re-plan periodically."""
    from lyra_ray.moe_serving.cli_serve import serve_main

    rc: int = serve_main(args)
    return rc


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model flags of `lyra moe serve`, shared with benchmarks/moe_serving.py."""
    p.add_argument("--layers", type=int, default=2, help="MoE layers")
    p.add_argument("--experts", type=int, default=4, help="experts per layer")
    p.add_argument("--replicas", type=int, default=8, help="replica budget per layer")
    p.add_argument("--dim", type=int, default=256, help="model width")
    p.add_argument("--hidden", type=int, default=1024, help="expert FFN width")
    p.add_argument("--skew", type=float, default=1.5, help="Zipf exponent of the gate bias")
    p.add_argument("--correlation", type=float, default=0.9, help="cross-layer gate correlation")
    p.add_argument("--seed", type=int, default=0)


def register(subparsers: Any) -> None:
    """Add the `moe` subcommand (with `plan`, `serve`) to a subparsers object."""
    moe = subparsers.add_parser("moe", help="MoE serving with popularity-based expert replicas")
    sub = moe.add_subparsers(dest="moe_command", required=True)

    plan = sub.add_parser("plan", help="plan expert replicas for a load file")
    plan.add_argument("--load", required=True, help='JSON {"logical_count": [[...]]}')
    plan.add_argument("--gpus", type=int, required=True, help="devices")
    plan.add_argument("--replicas", type=int, required=True, help="physical replicas per layer")
    plan.add_argument("--algorithm", choices=ALGORITHMS, default="lina")
    plan.add_argument("--slots", type=int, default=None, help="replica slots per device")
    plan.add_argument("--groups", type=int, default=8, help="expert groups (eplb-hierarchical)")
    plan.add_argument(
        "--nodes", type=int, default=None, help="nodes (eplb-hierarchical; default gpus/8)"
    )
    plan.add_argument("--json", default=None, help="write the report here")
    plan.set_defaults(func=cmd_plan)

    serve = sub.add_parser("serve", help="deploy the MoE Serve app locally and keep re-planning")
    add_model_args(serve)
    serve.add_argument("--duration", type=float, default=60.0, help="seconds to serve")
    serve.add_argument("--replan-every", type=float, default=10.0, help="seconds between re-plans")
    serve.add_argument("--threshold", type=float, default=0.2, help="phase-2 deviation threshold")
    serve.add_argument("--num-cpus", type=int, default=2)
    serve.add_argument(
        "--no-borrow",
        action="store_true",
        help="split each expert's tokens over its own replicas only (no per-request borrowing)",
    )
    serve.set_defaults(func=cmd_serve)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m lyra_ray.moe_serving.cli moe plan ...``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="lyra")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
