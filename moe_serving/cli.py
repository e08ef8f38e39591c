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

from lyra_ray.moe_serving.batch_regime import parse_regime
from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.plan_io import (
    ALGORITHMS,
    LoadFileError,
    check_budget,
    planner_for,
    predicted,
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
    if args.eplb_out and args.replicas % args.gpus:
        return _fail(
            f"--eplb-out: --replicas ({args.replicas}) must be a multiple of --gpus "
            f"({args.gpus}): an engine gives every GPU the same number of slots"
        )
    try:
        regime, cost = _regime_and_cost(args)
        nodes = args.nodes if args.nodes is not None else max(1, args.gpus // 8)
        slots = args.slots if args.slots is not None else -(-args.replicas // args.gpus)
        fn = planner_for(
            args.algorithm, args.gpus, args.replicas, slots, args.groups, nodes, regime, cost
        )
        plan, plan_s = timed_plan(fn, load)
    except ValueError as e:
        return _fail(str(e))
    out: dict[str, Any] = {"algorithm": args.algorithm, "load": str(args.load)}
    out.update(report(load, layers, plan, plan_s))
    if regime is not None and cost is not None:
        out["step_time"] = predicted(load, plan, args.replicas, regime, cost)
    if args.eplb_out:
        from lyra_ray.moe_serving.engine_map import sglang_expert_location

        total = _total_layers(args.load)
        try:
            data = sglang_expert_location(plan, layers, total)
            Path(args.eplb_out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.eplb_out).write_text(json.dumps(data))
        except (OSError, ValueError) as e:
            return _fail(f"--eplb-out {args.eplb_out}: cannot write ({e})")
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
    if "step_time" in out:
        t = out["step_time"]
        print(
            f"predicted expert step time: {t['plan_s'] * 1e3:.3f} ms; uniform "
            f"{t.get('uniform_s', float('nan')) * 1e3:.3f} ms, token balance "
            f"{t['token_balance_s'] * 1e3:.3f} ms ({plan.counts.sum(1).max()} replicas used)"
        )
    if args.eplb_out:
        print(f"wrote SGLang --init-expert-location map: {args.eplb_out}")
    return 0


def _regime_and_cost(
    args: argparse.Namespace,
) -> tuple[tuple[tuple[float, float], ...] | None, ExpertCost | None]:
    """The batch regime (``--batch-tokens``) and expert (``--expert``, ``--gpu``), if given."""
    if args.batch_tokens is None:
        return None, None
    regime = parse_regime(args.batch_tokens, "--batch-tokens")
    dim, sep, hidden = str(args.expert).partition("x")
    if not (sep and dim.isdigit() and hidden.isdigit() and int(dim) > 0 and int(hidden) > 0):
        raise ValueError(f"--expert: {args.expert!r} is not DIMxHIDDEN (e.g. 7168x2048)")
    try:
        return regime, ExpertCost(int(dim), int(hidden), args.gpu)
    except ValueError as e:
        raise ValueError(f"--gpu: {e}") from None


def _total_layers(path: str) -> int:
    """All layers of the load file (dense ones included): the engine's ``num_layers``."""
    return len(json.loads(Path(path).read_text())["logical_count"])


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
    plan.add_argument(
        "--batch-tokens",
        default=None,
        help="batch regime: routed tokens per MoE layer and step (batch tokens x top-k), "
        "one size or a histogram SIZE:WEIGHT,...; with it, lina plans for that regime",
    )
    plan.add_argument(
        "--expert", default="7168x2048", help="expert shape DIMxHIDDEN (default DeepSeek-V3's)"
    )
    plan.add_argument("--gpu", default="h200", help="GPU type of the expert-time model")
    plan.add_argument(
        "--eplb-out",
        default=None,
        help="write the placement as SGLang's --init-expert-location JSON "
        "(physical_to_logical_map, DeepSeek EPLB's phy2log)",
    )
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
