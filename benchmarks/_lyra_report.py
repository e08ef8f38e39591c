"""Summary and markdown tables of Lyra's evaluation (docs/lyra.md).

From ``benchmarks/lyra_eval.py``'s JSON (the Pollux suite and the Philly windows alike)
and ``benchmarks/lyra_ablation.py``'s. Ratios ``x`` are Baseline's figure over the
scenario's (higher is better), per (workload, seed) run; "vs Basic" is Basic's over
Lyra's (>= 0.99 meets the issue's goal: no greater, a 1 % tie counting).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

ORDER = ("baseline", "basic", "lyra", "ideal", "unlimited")
LABEL = {
    "baseline": "Baseline",
    "basic": "Basic",
    "lyra": "Lyra",
    "ideal": "Ideal",
    "unlimited": "Lyra, every inference server lendable",
}
PAPER = {  # Lyra (EuroSys'23), the trace-driven table: mean queuing s, mean JCT s, % preempted
    "baseline": (3072, 16610, None),
    "basic": (2010, 11236, 12.24),
    "lyra": (1835, 10434, 7.35),
    "ideal": (1157, 8891, None),
}
TIE = 1.01
PREEMPT_LIMIT = 0.05
"""The issue's goals on one run: queuing and JCT at most ``TIE`` x Basic's, preempted at
most ``PREEMPT_LIMIT`` (every report, the ablation and the jittered replays judge so)."""
Runs = Mapping[str, Mapping[str, Any]]


def _ratio(base: float | None, x: float | None) -> float | None:
    if base is None or x is None or x <= 0:
        return None
    return base / x


def ratios(pair: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per scenario of one run: queue_x, jct_x, p95s, preemption, on-loan."""
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
    """The issue's acceptance for one run: Lyra vs Basic, preemptions, JCT vs Baseline."""
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
            "queue_at_most_basic": ly["avg_queue_s"] <= TIE * ba["avg_queue_s"] + 1e-9,
            "jct_at_most_basic": ly["avg_jct_s"] <= TIE * ba["avg_jct_s"] + 1e-9,
            "preemption_at_most_5pct": ly["preemption_ratio"] <= PREEMPT_LIMIT,
            "jct_at_least_1.5x": bl["avg_jct_s"] / ly["avg_jct_s"] >= 1.5,
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
    """Mean / std / range of every ratio per scenario over all runs, plus the goals."""
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
    if not num.isdigit():
        head, num = "", w
    return (head, int(num) if num.isdigit() else 0, int(s) if s.isdigit() else 0)


def summary_table(report: Mapping[str, Any]) -> str:
    """Each scenario's ratios over Baseline, mean [min - max] over runs, beside the
    paper's table (its absolute means and the ratios they give)."""
    summ = summarise(report.get("runs", {}))
    out = [
        "| | mean queuing | mean JCT | p95 JCT | preempted | on-loan util. | (while jobs wait) "
        "| paper: queuing / JCT (s) | paper: x | paper: preempted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    pb = PAPER["baseline"]
    for name in ORDER:
        st = summ["scenarios"].get(name)
        if not st:
            continue

        def cell(k: str, fmt: Any, st: Mapping[str, Any] = st) -> str:
            v = st.get(k)
            return "-" if v is None else f"{fmt(v['mean'])} [{fmt(v['min'])} - {fmt(v['max'])}]"

        paper = PAPER.get(name)
        ref = ref_x = ref_p = ""
        if paper:
            ref = f"{paper[0]:,} / {paper[1]:,}"
            ref_x = f"{pb[0] / paper[0]:.2f}x / {pb[1] / paper[1]:.2f}x"
            ref_p = "-" if paper[2] is None else f"{paper[2]}%"
        out.append(
            f"| {LABEL[name]} | {cell('queue_x', _x)} | {cell('jct_x', _x)} "
            f"| {cell('p95_jct_x', _x)} | {cell('preemption_ratio', _pct)} "
            f"| {cell('on_loan_utilisation', _pct)} "
            f"| {cell('on_loan_utilisation_while_queued', _pct)} | {ref} | {ref_x} | {ref_p} |"
        )
    return "\n".join(out)


def _mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def goals_table(report: Mapping[str, Any]) -> str:
    """Lyra against the goals, per run: Basic's mean over Lyra's (>= 0.99 meets it)."""
    runs: Runs = report.get("runs", {})
    summ = summarise(runs)
    out = [
        "| run | held out | queuing vs Basic | JCT vs Basic | preempted | all three met | JCT x |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(summ["goals"], key=_sort_key):
        g = summ["goals"][key]
        if not g:
            continue
        held = "yes" if runs[key].get("held_out") else "no (chose defaults)"
        met = g["met"]
        three = met["queue_at_most_basic"] and met["jct_at_most_basic"]
        three = three and met["preemption_at_most_5pct"]
        qv = "-" if g["queue_vs_basic"] is None else f"{g['queue_vs_basic']:.3f}"
        out.append(
            f"| {key} | {held} | {qv} | {g['jct_vs_basic']:.3f} "
            f"| {_pct(g['preemption_ratio'])} | {_mark(three)} | {_x(g['jct_x'])} |"
        )
    return "\n".join(out)


def pairs_table(report: Mapping[str, Any]) -> str:
    """Every run's absolute figures per scenario (the issue's per-run report)."""
    runs: Runs = report.get("runs", {})
    out = [
        "| run | scenario | queuing mean / p95 (s) | JCT mean / p95 (s) | preempted | resizes "
        "| on-loan util. (while jobs wait) | GPU-h lent (used) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(runs, key=_sort_key):
        for name in ORDER:
            s = runs[key]["scenarios"].get(name)
            if s is None:
                continue
            lent = s.get("gpu_hours_lent")
            used = s.get("gpu_hours_lent_busy")
            out.append(
                f"| {key} | {LABEL[name]} | {_num(s['avg_queue_s'])} / {_num(s['p95_queue_s'])} "
                f"| {_num(s['avg_jct_s'])} / {_num(s['p95_jct_s'])} "
                f"| {_pct(s['preemption_ratio'])} | {s['resizes']} "
                f"| {_pct(s['on_loan_utilisation'])} "
                f"({_pct(s.get('on_loan_utilisation_while_queued'))}) "
                f"| {_num(lent)} ({_num(used)}) |"
            )
    return "\n".join(out)


def workloads_table(report: Mapping[str, Any]) -> str:
    """Per workload, mean over its seeds: Baseline's mean JCT over each scenario's (the
    1.5x goal), with Ideal and unlimited loans as ceilings."""
    runs: Runs = report.get("runs", {})
    by: dict[str, dict[str, list[float]]] = {}
    for key, pair in runs.items():
        wl = key.rpartition("/")[0]
        for name, r in ratios(pair).items():
            if r["jct_x"] is not None:
                by.setdefault(wl, {}).setdefault(name, []).append(r["jct_x"])
    names = [n for n in ORDER if n != "baseline" and any(n in d for d in by.values())]
    out = [
        "| workload | " + " | ".join(f"JCT x, {LABEL[n]}" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for wl in sorted(by, key=lambda k: _sort_key(f"{k}/0")):
        cells = [_x(statistics.fmean(by[wl][n])) if n in by[wl] else "-" for n in names]
        out.append(f"| {wl} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def tables(report: Mapping[str, Any]) -> str:
    """The markdown tables docs/lyra.md shows."""
    if not report.get("runs"):
        return "(no runs)"
    return "\n\n".join(
        [
            "Mean over runs, [min - max]; x = Baseline's mean over the row's.",
            summary_table(report),
            "Goals per run (Lyra): Basic's mean over Lyra's (>= 0.99 meets it), preempted.",
            goals_table(report),
            "Per workload: Baseline's mean JCT over the scenario's, mean over seeds.",
            workloads_table(report),
            "Every run.",
            pairs_table(report),
        ]
    )


# ---------------------------------------------------------------------------- ablation


def ablation_table(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md's ablation: each variant of Lyra against Basic, Pollux and Philly."""
    labels = doc.get("labels", {})
    order = doc.get("order", list(labels))
    out = [
        "| Lyra with | Pollux: all goals met | queuing / JCT / preempted met "
        "| queuing, JCT vs Basic (geo. mean) | max preempted | Philly: all goals met "
        "| queuing / JCT / preempted met | queuing, JCT vs Basic | max preempted |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in order:
        cells = []
        for suite in ("pollux", "philly"):
            t = doc.get(suite, {}).get(key)
            if t is None:
                cells += ["-"] * 4
                continue
            cells += [
                f"{t['all']}/{t['runs']}",
                f"{t['queue']} / {t['jct']} / {t['preempted']}",
                f"{t['queue_geo']:.3f}, {t['jct_geo']:.3f}",
                _pct(t["max_preempted"]),
            ]
        out.append(f"| {labels[key]} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def sensitivity_table(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md's held-out seeds and other pool sizes: Lyra's defaults vs Basic."""
    out = [
        "| regime | training / inference pool | serving capacity (req/s per server) | seeds "
        "| all goals met | queuing / JCT / preempted met | queuing, JCT vs Basic "
        "| max preempted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in doc.get("sensitivity", {}).items():
        caps = ", ".join(s.split("@")[1] for s in t["serving"])
        alts = t.get("alternatives", {}).values()
        for label, r in ((name, t), *((f"{name}, with {a['label']}", a) for a in alts)):
            out.append(
                f"| {label} | {t['cluster']} / {t['inference']} | {caps} "
                f"| {', '.join(map(str, t['seeds']))} | {r['all']}/{r['runs']} "
                f"| {r['queue']} / {r['jct']} / {r['preempted']} "
                f"| {r['queue_geo']:.3f}, {r['jct_geo']:.3f} | {_pct(r['max_preempted'])} |"
            )
    return "\n".join(out)


def noise_line(doc: Mapping[str, Any]) -> str:
    """How far Basic's own means move when arrivals move by up to a minute."""
    n = doc.get("noise")
    if not n:
        return "(no noise runs)"
    q = [r["queue"] for r in n["runs"].values() if r["queue"] is not None]
    j = [r["jct"] for r in n["runs"].values()]
    off = [r for r in n["runs"].values() if r["queue"] is not None and abs(r["queue"] - 1) > 0.01]
    return (
        f"Basic against itself with every arrival up to {n['jitter_s']:.0f} s later, on the "
        f"{len(n['runs'])} Pollux runs: mean queuing moves by {min(q):.2f}x to "
        f"{max(q):.2f}x ({len(off)} of {len(q)} runs by more than 1 %), mean JCT by "
        f"{min(j):.2f}x to {max(j):.2f}x."
    )


def _sweep_table(
    doc: Mapping[str, Any],
    part: str,
    what: str,
    columns: tuple[str, ...],
    cells: Callable[[str], list[str]],
    order: Callable[[str], Any],
) -> str:
    """A sweep of ``lyra_ablation.py`` (``--grid``, ``--loan-grid``): each setting on the
    tuning runs, which choose, and beside it on all 24."""
    g = doc.get(part)
    if not g:
        return f"(no {part.replace('_', ' ')} run)"
    price = doc.get("restart_s", {}).get(part)
    works = ", ".join(map(str, g["tuning_workloads"]))
    out = [
        f"Each {what} on the tuning workloads ({works}; seeds 0-2), and on all 24 runs beside "
        f"it; restart price {price:g} s for a job that states nothing.",
        "",
        "| "
        + " | ".join(f"`{c}`" for c in columns)
        + " | tuning: all goals met | queuing, JCT vs Basic "
        "| max preempted | all 24: all goals met | queuing, JCT vs Basic |",
        "|" + "---|" * (len(columns) + 5),
    ]
    for name in sorted(g["variants"], key=order):
        t, a = g["variants"][name]["tuning_runs"], g["variants"][name]["all_runs"]
        out.append(
            "| " + " | ".join(cells(name)) + f" | {t['all']}/{t['runs']} | {t['queue_geo']:.3f}, "
            f"{t['jct_geo']:.3f} | {_pct(t['max_preempted'])} | {a['all']}/{a['runs']} "
            f"| {a['queue_geo']:.3f}, {a['jct_geo']:.3f} |"
        )
    return "\n".join(out)


def _setting(v: str) -> tuple[float, str]:
    """A sweep's value for sorting: numbers in order, ``None`` (off) last."""
    return (float("inf"), v) if v == "None" else (float(v), v)


def grid_table(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md's re-choice of ``lend_after_s`` x ``move_gain_s``."""
    return _sweep_table(
        doc,
        "grid",
        "pair",
        ("lend_after_s", "move_gain_s"),
        lambda n: [p.split("=")[1].removesuffix(".0") for p in n.split(",")],
        lambda n: tuple(_setting(p.split("=")[1]) for p in n.split(",")),
    )


def loan_grid_table(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md's choice of ``loan_max_remaining_s`` (the other settings their
    defaults)."""
    return _sweep_table(
        doc,
        "loan_grid",
        "value",
        ("loan_max_remaining_s",),
        lambda n: [n.split("=")[1].removesuffix(".0")],
        lambda n: _setting(n.split("=")[1]),
    )
