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


GPU_ROWS = (
    ("spare_first_run", "a spare's first run (CUDA first used here): a grow"),
    ("warmed_spare_first_run", "a spare that warmed its kernels up while it waited"),
    ("same_worker_again", "the same worker's loop again: a shrink, a restart in place"),
)
GPU_PHASES = ("build_model", "to_device", "restore", "step_1", "step_2", "total")


def gpu_warm_restart(d: dict[str, Any]) -> str:
    """``docs/runtime.md``'s table of a warm worker's restart on a real GPU
    (``benchmarks/results/gpu_warm_restart.json``, ``benchmarks/gpu_warm_restart.py``)."""
    med = d["median_s"]
    spares = d["spares"]
    cold = [s for s in spares if not s["warmed_up"]]
    gens = sum(len(s["generations"]) for s in spares)
    rows = [
        f"`benchmarks/gpu_warm_restart.py` on an {d['gpu']} (torch {d['torch']}, "
        f"{d['host_cores']} host cores, {d['measured']}): {d['job']}, a "
        f"{d['save']['checkpoint_bytes'] / 1e6:.0f} MB checkpoint (model and momentum); "
        f"{len(spares)} worker processes, {gens} runs of the loop; median seconds.",
        "",
        "| run | build model | to device | restore | step 1 | step 2 | **total** |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in GPU_ROWS:
        m = med.get(key)
        if m:
            cells = " | ".join(f"{m[p]:.2f}" for p in GPU_PHASES[:-1])
            rows.append(f"| {label} | {cells} | **{m['total']:.2f}** |")
    firsts = [s["device_init"] + s["generations"][0]["total"] for s in cold]
    rows += [
        "",
        f"Before its first run each process paid `import torch` once ({med['import_torch']:.2f} s) "
        f"and, when it first used CUDA, {med['device_init']:.2f} s initialising it. Writing the "
        f"checkpoint with `fsync`: {med['save_to_file']:.2f} s (into memory: "
        f"{med['save_to_memory']:.2f} s). The restart model's per-worker floor is a spare's "
        f"first run with its CUDA initialisation: {H200_WARM_SPARE_S:.2f} s "
        f"(median of {', '.join(f'{x:.2f}' for x in sorted(firsts))} s).",
    ]
    return "\n".join(rows)
