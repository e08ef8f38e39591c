"""``docs/testing.md``'s table of what a fresh Ray worker process costs, rendered from
``benchmarks/results/worker_start_cpu.json`` (``benchmarks/worker_start_cpu.py``)."""

from __future__ import annotations

from typing import Any


def render(data: dict[str, Any]) -> str:
    last = data["runs"][-1]
    rows = [
        f"{last['at']}, commit {last['commit']}, {last['rounds']} processes of each kind, "
        f"one core's speed {last['calibration_s']:.2f} s (`suite_cpu.calibration_s`)"
        + (f"; {last['note']}" if last["note"] else "")
        + ":",
        "",
        "| a fresh Ray worker that imports | median CPU-s at ready | vs bare |",
        "|---|---:|---:|",
    ]
    for kind, k in last["kinds"].items():
        rows.append(f"| {kind} | {k['median_cpu_s']:.2f} | {k['vs_bare']:.2f}x |")
    return "\n".join(rows)
