"""`lyra moe plan` — registered into the `lyra` CLI by ``lyra_ray.cli.moe_serve``, which adds
`lyra moe serve` (the lyra-owned MoE service; it needs the scheduler, which this package
must not import).

Standalone too:
``python -m lyra_ray.moe_serving.cli moe plan --load FILE --gpus 32 --replicas 288``.
Bad input exits with code 2 and a message naming the file or flag, never a traceback.
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


def register(subparsers: Any) -> Any:
    """Add the `moe` subcommand (with `plan`) to a subparsers object; returns the `moe`
    group's subparsers, to which ``lyra_ray.cli.moe_serve`` adds `serve`."""
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

    return sub


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
