"""Summary and markdown tables of ``benchmarks/lyra_eval.py``'s results (docs/lyra.md).

Every ratio is the Baseline's figure over the scenario's (higher is better), computed per
(window, seed) pair; the summary gives their mean, standard deviation and range over
the pairs, so one lucky window cannot carry the result.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

ORDER = ("baseline", "basic", "lyra", "ideal", "lyra-one-type", "lyra-t4-fast")
LABEL = {
    "baseline": "Baseline",
    "basic": "Basic",
    "lyra": "Lyra",
    "ideal": "Ideal",
    "lyra-one-type": "Lyra, one GPU type per job",
    "lyra-t4-fast": "Lyra, loaned GPUs as fast as V100",
}
PAPER = {  # Lyra (EuroSys'23), the trace-driven table: x lower than Baseline, % preempted
    "basic": (1.52, 1.48, 12.24),
    "lyra": (1.67, 1.59, 7.35),
}
Runs = Mapping[str, Mapping[str, Any]]


def _ratio(base: float | None, x: float | None) -> float | None:
    if base is None or x is None or x <= 0:
        return None
    return base / x


def ratios(pair: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per scenario of one (window, seed): queue_x, jct_x, p95s, preemption, on-loan."""
    sc = pair["scenarios"]
    base = sc.get("baseline")
    out: dict[str, dict[str, float | None]] = {}
    for name, r in sc.items():
        out[name] = {
            "queue_x": _ratio(base["avg_queue_s"], r["avg_queue_s"]) if base else None,
            "jct_x": _ratio(base["avg_jct_s"], r["avg_jct_s"]) if base else None,
            "p95_jct_x": _ratio(base["p95_jct_s"], r["p95_jct_s"]) if base else None,
            "preemption_ratio": r["preemption_ratio"],
            "on_loan_utilisation": r["on_loan_utilisation"],
            "on_loan_utilisation_while_queued": r.get("on_loan_utilisation_while_queued"),
        }
    return out


def goals(pair: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's acceptance for one pair: Lyra vs Basic, preemptions, JCT vs Baseline."""
    sc = pair["scenarios"]
    if not {"baseline", "basic", "lyra"} <= set(sc):
        return {}
    ly, ba, bl = sc["lyra"], sc["basic"], sc["baseline"]
    return {
        "queue_vs_basic": ba["avg_queue_s"] / ly["avg_queue_s"] if ly["avg_queue_s"] > 0 else None,
        "jct_vs_basic": ba["avg_jct_s"] / ly["avg_jct_s"],
        "preemption_ratio": ly["preemption_ratio"],
        "jct_x": bl["avg_jct_s"] / ly["avg_jct_s"],
        "met": {
            "queue_at_least_basic": ly["avg_queue_s"] <= ba["avg_queue_s"],
            "jct_at_least_basic": ly["avg_jct_s"] <= ba["avg_jct_s"],
            "preemption_at_most_5pct": ly["preemption_ratio"] <= 0.05,
            "jct_at_least_1.6x": bl["avg_jct_s"] / ly["avg_jct_s"] >= 1.6,
        },
    }


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "n": float(len(values)),
    }


def summarise(runs: Runs) -> dict[str, Any]:
    """Mean / std / range of every ratio per scenario over all pairs, plus the goals."""
    per: dict[str, dict[str, list[float]]] = {}
    for pair in runs.values():
        for name, r in ratios(pair).items():
            for k, v in r.items():
                if v is not None:
                    per.setdefault(name, {}).setdefault(k, []).append(v)
    return {
        "scenarios": {n: {k: _stats(v) for k, v in d.items()} for n, d in per.items()},
        "goals": {key: goals(pair) for key, pair in sorted(runs.items())},
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _sort_key(key: str) -> tuple[str, int, int]:
    """``window/seed`` or ``workload-N/seed``, in numeric order."""
    w, _, s = key.rpartition("/")
    head, _, num = w.rpartition("-")
    return (head, int(num) if num.isdigit() else 0, int(s) if s.isdigit() else 0)


def summary_table(report: Mapping[str, Any]) -> str:
    """docs/lyra.md's first table: each scenario's ratios, mean [min - max] over pairs."""
    summ = summarise(report.get("runs", {}))
    out = [
        "| | mean queuing | mean JCT | p95 JCT | preempted | on-loan util. | (while jobs wait) "
        "| paper: queuing / JCT / preempted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ORDER:
        st = summ["scenarios"].get(name)
        if not st:
            continue

        def cell(k: str, fmt: Any, st: Mapping[str, Any] = st) -> str:
            v = st.get(k)
            return "-" if v is None else f"{fmt(v['mean'])} [{fmt(v['min'])} - {fmt(v['max'])}]"

        paper = PAPER.get(name)
        ref = f"{paper[0]}x / {paper[1]}x / {paper[2]}%" if paper else ""
        out.append(
            f"| {LABEL[name]} | {cell('queue_x', _x)} | {cell('jct_x', _x)} "
            f"| {cell('p95_jct_x', _x)} | {cell('preemption_ratio', _pct)} "
            f"| {cell('on_loan_utilisation', _pct)} "
            f"| {cell('on_loan_utilisation_while_queued', _pct)} | {ref} |"
        )
    return "\n".join(out)


def goals_table(report: Mapping[str, Any]) -> str:
    """docs/lyra.md's second table: Lyra against the goals, per (window, seed)."""
    runs: Runs = report.get("runs", {})
    summ = summarise(runs)
    out = [
        "| window / seed | held out | queuing vs Basic | JCT vs Basic | preempted | JCT x |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(summ["goals"], key=_sort_key):
        g = summ["goals"][key]
        if not g:
            continue
        held = "yes" if runs[key].get("held_out") else "no (tuned)"
        out.append(
            f"| {key} | {held} | {g['queue_vs_basic']:.3f} | {g['jct_vs_basic']:.3f} "
            f"| {_pct(g['preemption_ratio'])} | {_x(g['jct_x'])} |"
        )
    return "\n".join(out)


def tables(report: Mapping[str, Any]) -> str:
    """The markdown tables docs/lyra.md shows: the summary, the goals, every pair."""
    runs: Runs = report.get("runs", {})
    if not runs:
        return "(no runs)"
    out = [
        "Mean over all (window, seed) pairs, [min - max]; x = Baseline's mean over the row's.",
        "",
        summary_table(report),
        "",
        "Goals per pair (Lyra): Basic's mean over Lyra's (>= 1 meets it), preempted, JCT x.",
        "",
        goals_table(report),
    ]
    out += [
        "",
        "Every pair: mean queuing / JCT in s, x vs Baseline, preempted, on-loan utilisation.",
        "",
        pairs_table(report),
    ]
    return "\n".join(out)


def pairs_table(report: Mapping[str, Any]) -> str:
    """Every (window, seed) pair's absolute figures per scenario; docs/lyra.md shows it for
    the side runs (``--extra``), whose few pairs a mean over pairs would misstate."""
    runs: Runs = report.get("runs", {})
    out = [
        "| window / seed | scenario | queuing (s) | JCT (s) | running (s) | queuing x | JCT x "
        "| preempted | on-loan util. (while jobs wait) | reclaims | waiting incl. re-queuing (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(runs, key=_sort_key):
        r = ratios(runs[key])
        for name in ORDER:
            s = runs[key]["scenarios"].get(name)
            if s is None:
                continue
            out.append(
                f"| {key} | {LABEL[name]} | {s['avg_queue_s']:,.0f} | {s['avg_jct_s']:,.0f} "
                f"| {_num(s.get('mean_run_s'))} "
                f"| {_x(r[name]['queue_x'])} | {_x(r[name]['jct_x'])} "
                f"| {_pct(s['preemption_ratio'])} | {_pct(s['on_loan_utilisation'])} "
                f"({_pct(s.get('on_loan_utilisation_while_queued'))}) | {s['reclaims']} "
                f"| {_num(s.get('avg_wait_total_s'))} |"
            )
    return "\n".join(out)
