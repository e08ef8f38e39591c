"""The table of ``docs/runtime.md``'s restart section, rendered from
``benchmarks/results/resize_phases.json`` (``benchmarks/resize_phases.py``)."""

from __future__ import annotations

import statistics
from typing import Any

from lyra_ray.model.restart_cost import H200_COLD_START_S, MEASURED, RESTART_S

LABELS = {
    "stop_signal_s": "stop signal: request → the loop sees it",
    "checkpoint_s": "checkpoint: → written, loop returned",
    "relaunch_s": "relaunch: → next generation started",
    "workers_up_s": "workers up: → first worker reports",
    "first_step_s": "first step: → restored, one step",
}


def render(data: dict[str, Any]) -> str:
    recs = data["resizes"]
    rows = [
        f"`.venv/bin/python {data['command']}`: {len(recs)} resizes (2 ↔ 4 workers) on "
        f"{data['cluster']}; seconds.",
        "",
        "| phase | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for key, label in LABELS.items():
        vals = [r["phases"][key] for r in recs if key in r["phases"]]
        rows.append(
            f"| {label} | {data['median_s'][key]:.2f} | {min(vals):.2f} | {max(vals):.2f} |"
        )
    totals = [r["total_s"] for r in recs]
    rows.append(
        f"| **total**: request → first step | **{data['median_s']['total_s']:.2f}** | "
        f"{min(totals):.2f} | {max(totals):.2f} |"
    )
    local = MEASURED.workers_up_s + MEASURED.first_step_s
    rows += [
        "",
        f"Restart model (`lyra_ray/model/restart_cost.py`): {MEASURED.stop_signal_s:.2f} + "
        f"{MEASURED.checkpoint_s:.2f} + {MEASURED.relaunch_s:.2f} + max({local:.2f}, "
        f"{H200_COLD_START_S:.2f} H200 cold start) = **{RESTART_S:.1f} s** per restart "
        f"(median of the {len(recs)} totals: {statistics.median(totals):.1f} s).",
    ]
    return "\n".join(rows)
