"""The table of ``docs/runtime.md``'s restart section, rendered from
``benchmarks/results/resize_phases.json`` (``benchmarks/resize_phases.py``)."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks._resize_probe import PARTS
from lyra_ray.model.restart_cost import H200_WARM_SPARE_S, MEASURED, RESTART_S

LABELS = {
    "stop_signal_s": "stop signal: decision → the loop sees it",
    "checkpoint_s": "checkpoint: → written, loop returned",
    "relaunch_s": "relaunch: → next generation started",
    "workers_up_s": "workers up: → first worker reports",
    "first_step_s": "first step: → restored, one step",
}
RUNS = {
    "baseline": "Ray Train (before #47)",
    "baseline_fast_poll": "Ray Train, 0.1 s poll",
    "warm": "warm workers",
    "state_200mb": "warm, 200 MB state",
    "cold_grow": "warm, no spare waits",
}


def _cell(vals: list[float], med: float | None) -> str:
    if not vals or med is None:
        return "–"
    return f"{med:.2f} ({min(vals):.2f}–{max(vals):.2f})"


def render(data: dict[str, Any]) -> str:
    runs = {k: data["runs"][k] for k in RUNS if k in data["runs"]}
    rows = [
        f"`.venv/bin/python {data['command']}`: 2 ↔ 4 worker resizes on {data['cluster']}, "
        "each run under a scheduler of its own, one after the other in one process; "
        "seconds from the scheduler's decision, median (min–max).",
        "",
        "| phase | " + " | ".join(RUNS[k] for k in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    for key, label in LABELS.items():
        cells = [
            _cell(
                [r["phases"][key] for r in run["resizes"] if key in r["phases"]],
                run["median_s"].get(key),
            )
            for run in runs.values()
        ]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = [
        _cell([r["total_s"] for r in run["resizes"]], run["median_s"]["total_s"])
        for run in runs.values()
    ]
    rows.append(
        "| **total**: decision → first step | " + " | ".join(f"**{c}**" for c in cells) + " |"
    )
    for name, to in (("shrink 4 → 2", 2), ("grow 2 → 4", 4)):
        cells = [
            _cell(
                [r["total_s"] for r in run["resizes"] if r["to_workers"] == to],
                run["median_s"].get(f"{name.split()[0]}_total_s"),
            )
            for run in runs.values()
        ]
        rows.append(f"| total, {name} | " + " | ".join(cells) + " |")
    rows.append(
        "| resizes | " + " | ".join(str(len(run["resizes"])) for run in runs.values()) + " |"
    )
    loads = [
        f"{run['loadavg_before'][0]:.1f} → {run['loadavg_after'][0]:.1f}" for run in runs.values()
    ]
    rows.append("| host load (1 min), before → after | " + " | ".join(loads) + " |")
    rows += [
        "",
        "Where a resize's time went, at the workers' own moments (`benchmarks/_resize_probe.py`; "
        "the slowest worker of each generation; median seconds):",
        "",
        "| from the loop seeing the stop | " + " | ".join(RUNS[k] for k in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    for key, label in PARTS:
        cells = []
        for run in runs.values():
            v = run["breakdown"]["median_s"].get(key)
            cells.append("–" if v is None else f"{v:.2f}")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    news = [run["breakdown"]["new_processes_per_resize"] for run in runs.values()]
    rows.append("| new processes per resize | " + " | ".join(
        "–" if not n else f"{min(n)}–{max(n)}" for n in news) + " |")  # fmt: skip
    rows.append("")
    if "baseline_over_warm" in data:
        rows.append(
            f"The warm path's median resize is {data['baseline_over_warm']:.1f}x shorter than "
            "Ray Train's, measured side by side (median totals)."
        )
    local = MEASURED.workers_up_s + MEASURED.first_step_s
    warm = data["resizes"]
    rows += [
        f"Restart model (`lyra_ray/model/restart_cost.py`, the warm medians): "
        f"{MEASURED.stop_signal_s:.2f} + {MEASURED.checkpoint_s:.2f} + {MEASURED.relaunch_s:.2f} "
        f"+ max({local:.2f}, {H200_WARM_SPARE_S:.2f} H200 warm spare) = **{RESTART_S:.1f} s** per "
        f"restart (median of the {len(warm)} warm totals: "
        f"{statistics.median(r['total_s'] for r in warm):.1f} s).",
    ]
    return "\n".join(rows)
