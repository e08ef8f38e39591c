"""docs/teams.md's heterogeneous evaluation, rendered from
``benchmarks/results/teams_hetero.json`` (``benchmarks/teams_hetero.py``): quotas inside
the policy against admit-then-pin, per policy, with each team's share."""

from __future__ import annotations

from typing import Any

NAMES = {"no_quotas": "no quotas", "pin": "admit-then-pin", "inside": "inside the policy"}


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _gpu_h(by_type: dict[str, float]) -> str:
    return " ".join(f"{g} {v:.0f}" for g, v in sorted(by_type.items()) if v >= 0.5) or "-"


def render(data: dict[str, Any]) -> str:
    w = data["workload"]
    lines = [
        "| policy | enforcement | mean JCT (h) | vs admit-then-pin | makespan (h) | "
        "utilisation | finished |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for pol, scenarios in data["policies"].items():
        pin = scenarios.get("pin", {}).get("mean_jct_h")
        for sc, r in scenarios.items():
            ratio = "-" if not pin or sc == "pin" else f"{r['mean_jct_h'] / pin:.2f}x"
            lines.append(
                f"| `{pol}` | {NAMES.get(sc, sc)} | {_f(r['mean_jct_h'])} | {ratio} | "
                f"{_f(r['makespan_h'], 1)} | {r['utilisation']:.1%} | "
                f"{r['completed']} of {w['jobs']} |"
            )
    lines += [
        "",
        "| policy | team (guarantee) | enforcement | mean JCT (h) | GPU-hours held by type | "
        "guarantee share when asked |",
        "|---|---|---|---:|---|---:|",
    ]
    for pol, scenarios in data["policies"].items():
        head = f"`{pol}`"
        for team, g in w["guarantees"].items():
            quota = ",".join(f"{k}={v}" for k, v in sorted(g.items()))
            who = f"{team} ({quota})"
            for sc, r in scenarios.items():
                t = r["teams"][team]
                lines.append(
                    f"| {head} | {who} | {NAMES.get(sc, sc)} | {_f(t['mean_jct_h'])} | "
                    f"{_gpu_h(t['gpu_h'])} | {_f(t['guarantee_share'], 3)} |"
                )
                head = who = ""
    lines += [
        "",
        f"_{w['jobs']} jobs ({', '.join(f'{k} {v}' for k, v in w['jobs_per_team'].items())}), "
        f"{w['source']}; cluster {w['cluster']} (one GPU per server); "
        f"`{data['command'].strip()}`._",
    ]
    return "\n".join(lines)
