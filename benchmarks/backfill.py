"""Backfill in the simulator: Gavel's rounds against rounds with backfill, on one trace.

Why a script: ``docs/runtime.md`` quoted the two average JCTs of this comparison from a
run nobody stored, and they went stale as the core changed. This runs the documented
command twice (``lyra simulate ... [--backfill]``, the user's own code path), stores both
reports' figures in ``benchmarks/results/backfill.json`` and re-renders the doc's table
through the docs-table registry.

    .venv/bin/python -m benchmarks.backfill      # a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
TRACE = "max_min_fairness.trace"
CLUSTER = "v100=8,p100=16,k80=24"
POLICY = "max_min_fairness_perf"
KEYS = (
    "avg_jct_s", "median_jct_s", "p95_jct_s", "avg_queue_s", "makespan_s", "preemptions",
    "preemption_ratio", "completed_jobs", "total_jobs", "core_steps", "wall_s",
)  # fmt: skip
OUT = ROOT / "benchmarks" / "results" / "backfill.json"


def command(backfill: bool) -> list[str]:
    """The command docs/runtime.md names, as run (the trace path relative to the repo)."""
    trace = f"../shared/data/gavel/traces/{TRACE}"
    cmd = ["lyra", "simulate", "--trace", trace, "--cluster", CLUSTER, "--policy", POLICY]
    return [*cmd, "--backfill"] if backfill else cmd


def run(backfill: bool) -> dict[str, Any]:
    """One ``lyra simulate`` in a subprocess (the CLI the doc cites), its JSON report's figures."""
    argv = command(backfill)
    trace = SHARED / "gavel" / "traces" / TRACE
    exe = str(Path(sys.executable).with_name("lyra"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        full = [exe, *argv[1:], "--quiet", "--json", str(out)]
        full[full.index("--trace") + 1] = str(trace)
        t0 = time.perf_counter()
        subprocess.run(full, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        report = json.loads(out.read_text())
    row = {k: report.get(k) for k in KEYS}
    row["command_wall_s"] = wall
    row["command"] = " ".join(argv)
    return row


def render(result: dict[str, Any]) -> str:
    """docs/runtime.md's backfill table: each arm's average JCT and preemptions."""
    off, on = result["runs"]["rounds"], result["runs"]["backfill"]
    rows = [
        "| simulator | avg JCT (s) | median JCT (s) | preemptions | jobs finished |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in (("Gavel's rounds", off), ("`--backfill`", on)):
        rows.append(
            f"| {label} | {r['avg_jct_s']:,.0f} | {r['median_jct_s']:,.0f} "
            f"| {r['preemptions']:,} | {r['completed_jobs']} of {r['total_jobs']} |"
        )
    ratio = on["avg_jct_s"] / off["avg_jct_s"]
    d = off["preemptions"] - on["preemptions"]
    fewer = f"{abs(d)} preemption{'' if abs(d) == 1 else 's'} {'fewer' if d >= 0 else 'more'}"
    rows += [
        "",
        f"`{POLICY}` on `{TRACE}` ({CLUSTER}): with backfill the average JCT is "
        f"{ratio:.3f}x that of Gavel's rounds, with {fewer}.",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if not (SHARED / "gavel" / "traces" / TRACE).is_file():
        print(f"skipped: {SHARED / 'gavel' / 'traces' / TRACE} not found (set LYRA_SHARED_DATA)")
        return 0
    result = {
        "trace": TRACE,
        "cluster": CLUSTER,
        "policy": POLICY,
        "runs": {"rounds": run(False), "backfill": run(True)},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(render(result))
    if args.out == OUT:
        from benchmarks.docs_tables import table

        table("runtime-backfill").write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
