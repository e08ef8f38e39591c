"""The decode-vs-prefill table of docs/moe.md, rendered from benchmarks/results/moe_cost_gain.json
(written by ``benchmarks/moe_cost_gain.py``; registered in ``benchmarks/docs_tables.py``)."""

from __future__ import annotations

from typing import Any


def render(data: dict[str, Any]) -> str:
    """One row per (load file, expert shape, batch): uniform's layer step time and each plan's
    gain over it under the H200 expert-time model, and the token-only gain beside it."""
    s = data["setup"]
    lines = [
        f"{s['experts']} experts, top-{s['top_k']}, {s['gpus']} H200s x {s['slots']} slots "
        f"({s['replicas']} replicas); {s['samples']} sampled steps per layer; gain = uniform's "
        "mean layer step time / the plan's (> 1: the plan is faster). Command: "
        f"`{s['command']}`.",
        "",
        "| load file | expert, flat region (tokens) | batch tokens (per expert) | uniform step | "
        "ours | EPLB | time-aware (replicas) | token-only gain, ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        g = r["gain"]
        lines.append(
            f"| {r['file']} | {r['expert']}, flat to ~{round(r['flat_until_tokens'], -1):.0f} | "
            f"{r['batch_tokens']:,} ({r['tokens_per_expert']:,.0f}) | "
            f"{r['step_us']['uniform']:,.0f} us | {g['ours']:.2f}x | {g['eplb']:.2f}x | "
            f"{g['time_aware']:.2f}x ({r['time_aware_replicas']}) | "
            f"{r['token_gain']['ours']:.2f}x |"
        )
    return "\n".join(lines) + "\n"
