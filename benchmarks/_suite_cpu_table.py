"""``docs/testing.md``'s CPU table, rendered from ``benchmarks/results/suite_cpu.json``
(``benchmarks/suite_cpu.py`` run around ``make test``)."""

from __future__ import annotations

from typing import Any

TOP = 12
"""Process names listed: enough to see what a large kind is made of."""


def render(data: dict[str, Any]) -> str:
    rows = [
        "| run | commit | exit | one core's speed | wall | host busy | CPU-s | floor | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in data["runs"]:
        calib = r.get("calibration_s")  # not in the first run's record
        speed = f"{calib:.2f} s" if calib is not None else "not measured"
        rows.append(
            f"| {r['at']} | {r['commit']} | {r['exit']} | {speed} "
            f"| {r['wall_s'] / 60:.1f} min "
            f"| {100 * (r['host_busy_share'] or 0):.0f} % | {r['host_busy_cpu_s']:.0f} "
            f"| {r['floor_min']:.1f} min | {r['note']} |"
        )
    last = data["runs"][-1]
    share = last.get("counted_share", last.get("sampled_share")) or 0
    how = last.get("counted_by", "samples every 15 s")  # older records: samples only
    whole = how == "process accounting"
    rows += [
        "",
        "One core's speed: seconds for a fixed pure-Python loop before the run "
        "(`suite_cpu.calibration_s`), lower is faster. Floor: the host's busy CPU over its "
        "cores, the shortest the run could take on that host with its work unchanged.",
        "",
        f"Where the newest run's CPU went, by kind of process ({last['at']}; counted by "
        f"{how}, which holds {100 * share:.0f} % of the host's busy CPU"
        + ("" if whole else ": processes that start and end between two samples are missed")
        + "):",
        "",
        "| kind of process | processes | CPU-s | share |",
        "|---|---:|---:|---:|",
    ]
    for name, k in last["by_kind"].items():
        procs = k.get("processes", "")  # counted from the accounting runs on
        rows.append(f"| {name} | {procs} | {k['cpu_s']:.0f} | {100 * k['share']:.0f} % |")
    names = list(last.get("top_names", {}).items())[:TOP]  # recorded from the second run on
    if names:
        rows += ["", f"The {len(names)} processes (by name) that spent the most:", ""]
        rows += ["| process | processes | CPU-s |", "|---|---:|---:|"]
        for n, v in names:
            cpu, procs = (v["cpu_s"], v["processes"]) if isinstance(v, dict) else (v, "")
            rows.append(f"| `{n}` | {procs} | {cpu:.0f} |")
    return "\n".join(rows)
