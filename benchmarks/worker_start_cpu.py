"""The CPU a fresh Ray worker process costs before it does anything, by what it imports.

Why: counted whole (``suite_cpu.py`` with process accounting), most of ``make test``'s
CPU is processes starting, not tests running: a quiet run started some 550 Ray worker
processes (gang workers, serving replicas, the scheduler, the checks that import a
user's module in a process of their own) and 26 clusters. This measures the unit
of that cost on the embedded cluster, beside a baseline in the same run: actors
created one after another, each reporting its own process's CPU seconds
(``time.process_time``: interpreter start, Ray's worker set-up, its imports, its
constructor) once ready, so no root and no process accounting is needed.

- ``bare``: an actor that imports nothing (the baseline: Ray's own cost);
- ``lyra worker``: one that imports lyra's gang worker module, as every gang worker does;
- ``torch``: one that imports PyTorch;
- ``lyra worker + torch``: both, what a gang worker holds once it trains.

Kinds are interleaved (one of each per round) so a host that speeds up or slows down
during the run weighs on all alike. Stored: each kind's median, its ratio to ``bare``,
and the single samples, appended to ``benchmarks/results/worker_start_cpu.json``.

    .venv/bin/python -m benchmarks.worker_start_cpu --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "worker_start_cpu.json"
KINDS: dict[str, tuple[str, ...]] = {
    "bare": (),
    "lyra worker": ("lyra_ray.runtime.gang_worker",),
    "torch": ("torch",),
    "lyra worker + torch": ("lyra_ray.runtime.gang_worker", "torch"),
}


def measure(rounds: int) -> dict[str, list[float]]:
    """Each kind's per-process CPU seconds at ready, ``rounds`` processes of each."""
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-worker-start-{os.getuid()}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from benchmarks._scratch_cluster import scratch_cluster

    @ray.remote(num_cpus=0, max_restarts=0)
    class Probe:
        def __init__(self, modules: tuple[str, ...]) -> None:
            import importlib

            for m in modules:
                importlib.import_module(m)

        def cpu_s(self) -> float:
            return time.process_time()

    out: dict[str, list[float]] = {k: [] for k in KINDS}
    with scratch_cluster(()):
        for r in range(rounds):
            for kind, modules in KINDS.items():
                actor = Probe.remote(modules)  # type: ignore[attr-defined]
                out[kind].append(ray.get(actor.cpu_s.remote(), timeout=300))
                ray.kill(actor)
            sys.stderr.write(
                f"round {r + 1}/{rounds}: "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in out.items())
                + "\n"
            )
    return out


def summarise(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Each kind's median CPU seconds and its ratio to the bare worker's."""
    medians = {k: statistics.median(v) for k, v in samples.items()}
    base = medians["bare"]
    return {
        k: {
            "median_cpu_s": round(m, 3),
            "vs_bare": round(m / base, 2) if base > 0 else None,
            "samples": [round(x, 3) for x in samples[k]],
        }
        for k, m in medians.items()
    }


def main(argv: list[str] | None = None) -> int:
    from benchmarks._runs_file import append_run, new_run, rounds_type

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=rounds_type(100), default=5, help="processes of each kind")
    ap.add_argument("--note", default="", help="what ran beside it, the host's load")
    ap.add_argument("--out", type=Path, default=OUT, help="the results JSON (appended to)")
    args = ap.parse_args(argv)
    run = new_run(args.note)
    run.update(rounds=args.rounds, kinds=summarise(measure(args.rounds)))
    append_run(args.out, run)
    sys.stderr.write(
        "worker start, median CPU-s: "
        + ", ".join(f"{k} {v['median_cpu_s']:.2f}" for k, v in run["kinds"].items())
        + f" -> {args.out}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
