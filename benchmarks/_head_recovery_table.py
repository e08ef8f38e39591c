"""docs/reliability.md's head-recovery table, rendered from
``benchmarks/results/head_recovery.json`` (``benchmarks/head_recovery.py`` writes both)."""

from __future__ import annotations

import statistics
from typing import Any

STEPS = (
    ("head_ray_start_s", "the head's `ray start` ran again (its own duration)"),
    ("head_commands_done_s", "the head's commands done (`ray start`, then `lyra up`)"),
    ("nodes_rejoined_s", "both worker nodes alive again, same node ids"),
    ("scheduler_back_s", "the scheduler actor answers, its state reloaded"),
    ("service_answers_s", "the service answers HTTP again"),
    ("jobs_stepping_s", "every running job steps again"),
    ("all_finished_s", "every job finished, exactly its steps"),
)


def render(d: dict[str, Any]) -> str:
    runs = [r for r in d["runs"] if r.get("figures")]
    failed = len(d["runs"]) - len(runs)
    head = " | ".join(f"run {i + 1}" for i in range(len(runs)))
    rows = [
        f"| seconds after the kill | {head} | median |",
        "|---|" + "---:|" * (len(runs) + 1),
    ]
    for key, label in STEPS:
        vals = [float(r["figures"][key]) for r in runs]
        cells = " | ".join(f"{v:.1f}" for v in vals)
        rows.append(f"| {label} | {cells} | {statistics.median(vals):.1f} |")
    kept = resumed = repeated = 0
    for r in runs:
        for j in r["figures"]["jobs"].values():
            kept += bool(j["kept_running"])
            resumed += not j["kept_running"]
            repeated = max(repeated, int(j["steps_repeated"]))
    f0 = runs[0]["figures"] if runs else {}
    rows += [
        "",
        f"{len(runs)} run(s) of `{d['command']}` on a {d['cpus']}-core host ({d['date']})"
        + (f", {failed} failed" if failed else "")
        + f": jobs of {f0.get('steps', '?')} steps, a checkpoint every "
        f"{f0.get('checkpoint_every', '?')}. Of the running jobs, {kept} kept running "
        f"through the loss of the head and {resumed} resumed from a checkpoint; at most "
        f"{repeated} step(s) of one job ran twice. The queued job was still queued when "
        "the scheduler answered again, in every run; the scheduler's restart count rose.",
    ]
    return "\n".join(rows)
