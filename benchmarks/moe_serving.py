"""Serving p50/p95 latency and tokens/s: Lina (popularity-based) vs uniform replicas.

Run: ``.venv/bin/python benchmarks/moe_serving.py [--mode calibrated|real|both] [--seeds 0,1,2]``.
Writes benchmarks/results/moe_serving.json; the protocol is in benchmarks/moe/bench.py. One
seed, or a ``--seeds`` sweep on one cluster. Bad flags exit 2 before any cluster starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.moe_serving.cli import add_model_args  # noqa: E402

EXIT_BAD_INPUT = 2


def parser() -> argparse.ArgumentParser:
    """The model flags of `lyra moe serve` plus the measurement's own."""
    p = argparse.ArgumentParser(description=__doc__)
    add_model_args(p)
    p.add_argument("--mode", choices=("calibrated", "real", "both"), default="both")
    p.add_argument("--requests", type=int, default=80, help="requests per measured run")
    p.add_argument("--batch", type=int, default=16, help="sequences per request")
    p.add_argument("--seq", type=int, default=32, help="tokens per sequence")
    p.add_argument("--concurrency", type=int, default=4, help="closed-loop clients")
    p.add_argument("--device-dim", type=int, default=4096, help="calibrated device expert width")
    p.add_argument("--device-hidden", type=int, default=14336, help="its FFN hidden width")
    p.add_argument(
        "--service",
        choices=("host", "h200"),
        default="host",
        help="calibrated mode's service time: host = fixed + per-token fitted to the device "
        "expert timed on this host; h200 = the H200 expert-time model of each call's tokens",
    )
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "moe_serving.json"))
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument(
        "--seeds",
        default=None,
        help="comma-separated model/traffic seeds, e.g. 0,1,2: one run each on one cluster, "
        "plus min/median of the ratios (overrides --seed)",
    )
    return p


def _fail(msg: str) -> int:
    print(f"moe_serving.py: error: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _seeds(text: str | None) -> list[int] | None:
    """``--seeds 0,1,2`` -> [0, 1, 2]; None when the flag is absent, [] when it is malformed."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        return []


def check(args: argparse.Namespace) -> str | None:
    """Why these flags cannot run, or None. Checked before the cluster, not after the sweep."""
    if args.replicas < args.experts or args.replicas % args.experts:
        return "--replicas must be a multiple of --experts (uniform baseline)"
    seeds = _seeds(args.seeds)
    if seeds is not None and not seeds:
        return f"--seeds: expected comma-separated integers, got {args.seeds!r}"
    out = Path(args.json)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"--json {args.json}: cannot create its folder ({e})"
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return f"--json {args.json}: not writable"
    return None


def _summary_line(mode: str, r: dict[str, Any]) -> str:
    model = "roofline" in r["ideal"] and "(MODEL)" in r["label"]  # --service h200
    ideal = r["ideal"]["roofline"]["window"] if model else r["ideal"].get("service")
    ideal = (ideal or r["ideal"]["tokens"])["overall"]
    only = r["lina_counts_only"]
    return (
        f"{mode:>10}: p50 {r['uniform']['p50_ms']:.0f} -> {r['lina']['p50_ms']:.0f} ms "
        f"({r['p50_speedup']:.2f}x), p95 {r['uniform']['p95_ms']:.0f} -> "
        f"{r['lina']['p95_ms']:.0f} ms ({r['p95_speedup']:.2f}x), "
        f"tokens/s x{r['throughput_ratio']:.2f}; ideal {ideal:.2f}x; "
        f"counts only (no borrowing): p50 {only['p50_speedup']:.2f}x, "
        f"p95 {only['p95_speedup']:.2f}x"
    )


def run(args: argparse.Namespace) -> int:
    """Every seed on one local cluster; the JSON is rewritten after each; summary printed."""
    from benchmarks.moe.bench import setup_from_args
    from benchmarks.moe.bench_sweep import run_sweep, seed_setups

    seeds = _seeds(args.seeds)
    modes = ["real", "calibrated"] if args.mode == "both" else [args.mode]
    out = Path(args.json)
    setup = setup_from_args(args)

    def save(sweep: dict[str, Any]) -> None:
        # After every seed, so a sweep cut short keeps the seeds it finished. A single seed
        # writes its run alone (the historical format); a sweep writes all.
        out.write_text(json.dumps(sweep if seeds is not None else sweep["runs"][0], indent=2))

    sweep = run_sweep(seed_setups(setup, seeds or [setup.seed]), modes, args.num_cpus, save)
    for r in sweep["runs"]:
        for m in modes:
            print(f"seed {r['setup']['seed']} " + _summary_line(m, r[m]))
    if seeds is not None:
        for m in modes:
            summ = sweep["summary"][m]
            print(
                f"{m:>10} over seeds {seeds}: "
                + ", ".join(
                    f"{k} min {v['min']:.2f} median {v['median']:.2f}" for k, v in summ.items()
                )
            )
    print(f"wrote {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    err = check(args)
    if err:
        return _fail(err)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
