"""Markdown for ``benchmarks/results/packing_h200.json`` (``<!-- packing-h200 -->`` in
docs/gavel.md)."""

from __future__ import annotations

from typing import Any


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def render(data: dict[str, Any]) -> str:
    first, last = data["jct_window"]
    lines = [
        f"`{data['command']}` ({data['cpu_s']:.0f} s CPU), {data['cluster']}, "
        f"{data['jobs']:,} jobs of `{data['trace']}`, avg JCT over job ids "
        f"{first}–{last} (their run time alone: {_h(data['window_avg_run_time_alone_s'])} h "
        "on average); gain = unpacked / packed (> 1: packing helps).",
        "",
        "| load (mean inter-arrival, offered load) | policies (unpacked / packed) "
        "| avg JCT (h) | JCT gain | makespan (h) | makespan gain "
        "| distinct pairs formed | busy GPU time paired |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for lv in data["levels"]:
        load = f"{lv['level']} ({lv['mean_interarrival_s']:.0f} s, {lv['offered_load']:.2f})"
        for row in lv["pairs"]:
            u, p = row["unpacked_result"], row["packed_result"]
            lines.append(
                f"| {load} | `{row['unpacked']}` / `{row['packed']}` "
                f"| {_h(u['avg_jct_s'])} / {_h(p['avg_jct_s'])} | {row['jct_gain']:.2f}x "
                f"| {u['makespan_s'] / 3600:.0f} / {p['makespan_s'] / 3600:.0f} "
                f"| {row['makespan_gain']:.2f}x | {p['pairs_distinct']:,} "
                f"| {p['paired_gpu_time_share']:.0%} |"
            )
    return "\n".join(lines) + "\n"
