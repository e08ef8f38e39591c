"""docs/teams.md's table, rendered from ``benchmarks/results/teams_eval.json``."""

from __future__ import annotations

from typing import Any

NAMES = {
    "no_quotas": "no quotas",
    "hard_quotas": "hard quotas",
    "borrowing": "borrowing + reclaim",
    "borrowing_pin": "borrowing, admit-then-pin",
}


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def render(data: dict[str, Any]) -> str:
    """Per cluster size: the cluster's line per scenario, then each team's."""
    w = data["workload"]
    lines: list[str] = []
    for size, scenarios in data["scenarios"].items():
        g = w["guarantee_per_team"][size]
        lines += [
            f"**{size} V100s, {g} guaranteed per team**",
            "",
            "| scenario | utilisation | mean JCT (h) | mean queueing (h) | finished | "
            "preemptions | resizes |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for sc, r in scenarios.items():
            lines.append(
                f"| {NAMES.get(sc, sc)} | {r['utilisation']:.1%} | {_f(r['mean_jct_h'])} | "
                f"{_f(r['mean_queue_h'])} | {r['completed']} of {w['jobs']} | "
                f"{r['preemptions']} | {r['resizes']} |"
            )
        lines += [
            "",
            "| team (jobs, offered GPU-h) | scenario | mean JCT (h) | mean queueing (h) | "
            "guarantee share when asked | short beyond grace (h) | longest shortfall (h) |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for team in w["jobs_per_team"]:
            head = f"{team} ({w['jobs_per_team'][team]}, {w['offered_gpu_h_per_team'][team]:.0f})"
            for sc, r in scenarios.items():
                t = r["teams"][team]
                lines.append(
                    f"| {head} | {NAMES.get(sc, sc)} | {_f(t['mean_jct_h'])} | "
                    f"{_f(t['mean_queue_h'])} | {_f(t['guarantee_share'], 3)} | "
                    f"{_f(t['short_beyond_grace_h'])} | {_f(t['worst_short_h'])} |"
                )
                head = ""
        lines.append("")
    lines.append(
        f"_{w['jobs']} jobs, {w['source']}; policy `{w['policy']}`, seed {w['seed']}, "
        f"{w['elastic_share']:.0%} elastic, grace {w['grace_s']:g} s; "
        f"`{data['command'].strip()}`._"
    )
    return "\n".join(lines)
