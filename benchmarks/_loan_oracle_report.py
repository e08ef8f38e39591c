"""docs/lyra.md's table of ``benchmarks/lyra_loan_oracle.py``: Basic, Lyra and the
oracle Lyra per Philly pair, ratios against Basic (< 1: ahead of Basic)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def _ratio(a: float, b: float) -> float:
    return a / b if b else 1.0


def oracle_table(doc: Mapping[str, Any]) -> str:
    pairs: Mapping[str, Mapping[str, Mapping[str, float]]] = doc.get("pairs", {})
    if not pairs:
        return "(no oracle runs)"
    out = [
        "| pair | Basic preempted | Lyra: queuing, JCT vs Basic | preempted "
        "| oracle: queuing, JCT vs Basic | preempted |",
        "|---|---:|---|---:|---|---:|",
    ]
    logs: dict[str, list[float]] = {"lq": [], "lj": [], "oq": [], "oj": []}
    pre: dict[str, list[float]] = {"basic": [], "lyra": [], "oracle": []}
    for key in sorted(pairs, key=lambda k: tuple(int(x) for x in k.split("/"))):
        p = pairs[key]
        b = p["basic"]
        row = [key, f"{100 * b['preemption_ratio']:.1f} %"]
        for name, tag in (("lyra", "l"), ("oracle", "o")):
            q = _ratio(p[name]["avg_queue_s"], b["avg_queue_s"])
            j = _ratio(p[name]["avg_jct_s"], b["avg_jct_s"])
            logs[tag + "q"].append(math.log(q))
            logs[tag + "j"].append(math.log(j))
            row += [f"{q:.3f}, {j:.3f}", f"{100 * p[name]['preemption_ratio']:.1f} %"]
        for name in pre:
            pre[name].append(p[name]["preemption_ratio"])
        out.append("| " + " | ".join(row) + " |")

    def geo(k: str) -> str:
        return f"{math.exp(sum(logs[k]) / len(logs[k])):.3f}"

    def mean(k: str) -> str:
        return f"{100 * sum(pre[k]) / len(pre[k]):.1f} %"

    out.append(
        f"| geometric mean (preempted: mean) | {mean('basic')} | {geo('lq')}, {geo('lj')} "
        f"| {mean('lyra')} | {geo('oq')}, {geo('oj')} | {mean('oracle')} |"
    )
    lyra = [p["lyra"] for p in pairs.values()]
    if all("preemptions" in r for r in lyra):
        total = sum(r["preemptions"] for r in lyra)
        by_reclaim = sum(r["reclaim_preemptions"] for r in lyra)
        out += [
            "",
            f"Of Lyra's {total:,} preemptions over these pairs, {by_reclaim:,} "
            f"({100 * by_reclaim / max(total, 1):.0f} %) were reclaims of lent servers.",
        ]
    return "\n".join(out)
