"""The planner against a real pipeline, stored: predicted and measured step times.

Why a script beside the test: ``tests/ray/test_planner_pipeline.py`` checks the planner's
ranking and the bubble formula on a real ``torch.distributed.pipelining`` run over two Ray
actors, but a test keeps no numbers, and docs/planner.md's table of them was typed in
from one run. This runs the test's own measurement (``measure``, same configurations,
profiles and quiet-host rule), writes ``benchmarks/results/planner_pipeline.json`` and
re-renders the doc's table through the docs-table registry.

    nice -n 10 .venv/bin/python -m benchmarks.planner_pipeline   # ~1-2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "planner_pipeline.json"
COMMAND = "nice -n 10 .venv/bin/python -m benchmarks.planner_pipeline"
NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved"}


def _frac(x: float) -> str:
    """1.00, 0.50, 0.25, 0.125: two decimals, three where the third is not 0."""
    text = f"{x:.3f}"
    return text[:-1] if text.endswith("0") else text


def _bubble(r: dict[str, Any]) -> str:
    """The measured bubble; in parentheses for an even split, whose imbalance it includes
    (the formula assumes equal stages)."""
    b = f"{r['bubble_measured']:.2f}"
    return f"({b})" if r["partition"] == "even" else b


def render(data: dict[str, Any]) -> str:
    """docs/planner.md's real-pipeline table and the rank correlation under it."""
    lines = [
        "| schedule | m | v | split | stages | ranked | predicted s | measured s "
        "| bubble (p−1)/(vm) | measured bubble |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = sorted(data["rows"], key=lambda r: r["predicted_s"], reverse=True)
    for r in rows:
        lines.append(
            f"| {NAMES.get(r['schedule'], r['schedule'])} | {r['m']} | {r['v']} "
            f"| {r['partition']} | {', '.join(str(s) for s in r['stages'])} "
            f"| {'yes' if r['ranked'] else ''} "
            f"| {r['predicted_s']:.3f} | {r['measured_s']:.3f} | {_frac(r['bubble_formula'])} "
            f"| {_bubble(r)} |"
        )
    low = [r["predicted_s"] / r["measured_s"] - 1 for r in rows]
    off = max(
        abs(r["bubble_measured"] - r["bubble_formula"])
        for r in rows
        if r["shaped"] and r["partition"] == "balanced"
    )
    span = f"{min(low):+.0%} to {max(low):+.0%}".replace("-", "−")
    lines += [
        "",
        f"Spearman between predicted and measured step times over the "
        f"{sum(r['ranked'] for r in rows)} ranked configurations: {data['spearman']:.2f} "
        f"(over all {len(rows)}: {data['spearman_all']:.2f}); "
        f"predicted / measured − 1 from {span}; balanced "
        f"splits' measured bubble within {off:.2f} of the formula; "
        f"load average {data['load_avg_before'][0]:.2f} before the run "
        f"(`{data['command']}`, {data['date']}, {data['wall_s']:.0f} s).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from scipy.stats import spearmanr

    from tests.ray.test_planner_pipeline import HostBusy, measure, ranking, running_workers

    load = os.getloadavg()
    t0 = time.perf_counter()
    try:
        with running_workers() as ws:
            rows = measure(ws)
    except HostBusy as e:
        print(f"not stored: {e}")
        return 1
    wall = time.perf_counter() - t0
    every = spearmanr([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows])[0]
    data = {
        "command": COMMAND,
        "date": time.strftime("%Y-%m-%d"),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_before": list(load),
        "wall_s": wall,
        "spearman": ranking(rows),
        "spearman_all": float(every),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(render(data))
    if args.out == OUT:
        from benchmarks.docs_tables import table

        table("planner-pipeline").write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
