"""The sentences of docs/lyra.md that quote measured numbers, rendered from the results.

Why: the evaluation is rerun whenever the restart model's price changes (a re-measured
resize), and hand-typed counts like "23 of 24 runs" went stale at once. Each function
takes one results JSON (``lyra_eval.json``, ``lyra_eval_philly.json`` or
``lyra_ablation.json``) and returns markdown that ``benchmarks/docs_tables.py`` puts
between its markers, so ``tests/unit/test_docs_tables.py`` keeps it equal to the data.
The sentences state what the numbers are; why they are so stays in the doc's own words.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from benchmarks._lyra_report import TIE, _sort_key, goals
from lyra_ray.model.restart_cost import MEASURED, restart_s
from lyra_ray.sim.profiled_jobs import CHECKPOINT_MB

Runs = Mapping[str, Mapping[str, Any]]


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _num(x: float) -> str:
    return f"{x:,.0f}"


def _span(xs: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if f"{lo:.2f}" == f"{hi:.2f}" else f"{fmt.format(lo)}–{fmt.format(hi)}"


def _three(g: Mapping[str, Any]) -> bool:
    m = g["met"]
    return bool(
        m["queue_at_most_basic"] and m["jct_at_most_basic"] and m["preemption_at_most_5pct"]
    )


def _rows(runs: Runs) -> list[tuple[str, dict[str, Any]]]:
    out = [(k, goals(runs[k])) for k in sorted(runs, key=_sort_key)]
    return [(k, g) for k, g in out if g]


def _longer(a: float, b: float) -> str:
    """How much ``a`` is longer or shorter than ``b``, in words."""
    if a >= b:
        return f"{_pct(a / b - 1)} longer"
    return f"{_pct(1 - a / b)} shorter"


def _price(report: Mapping[str, Any]) -> str:
    p = report.get("settings", {}).get("restart_s")
    return "an unrecorded price" if p is None else f"{p:g} s"


def _miss(key: str, g: Mapping[str, Any], pair: Mapping[str, Any]) -> str:
    """One run's missed goals, with Lyra's and Basic's means."""
    ly, ba = pair["scenarios"]["lyra"], pair["scenarios"]["basic"]
    m = g["met"]
    parts = []
    if not m["queue_at_most_basic"]:
        parts.append(
            f"queues {_longer(ly['avg_queue_s'], ba['avg_queue_s'])} than Basic "
            f"({_num(ly['avg_queue_s'])} s against {_num(ba['avg_queue_s'])} s)"
        )
    jct = f"its mean JCT is {_longer(ly['avg_jct_s'], ba['avg_jct_s'])}"
    if not m["jct_at_most_basic"]:
        jct += f" ({_num(ly['avg_jct_s'])} s against {_num(ba['avg_jct_s'])} s)"
    parts.append(jct)
    if not m["preemption_at_most_5pct"]:
        parts.append(f"it preempts {_pct(g['preemption_ratio'])} of jobs")
    idl = pair["scenarios"].get("ideal")
    if idl is not None:
        parts.append(
            f"Ideal (free restarts) queues {_num(idl['avg_queue_s'])} s, "
            f"JCT {_num(idl['avg_jct_s'])} s"
        )
    return f"{key}: Lyra " + ", ".join(parts)


def _by_workload(runs: Runs) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key in sorted(runs, key=_sort_key):
        out.setdefault(key.rpartition("/")[0], []).append(key)
    return out


def _jct_x(pair: Mapping[str, Any], name: str) -> float | None:
    sc = pair["scenarios"]
    if name not in sc or "baseline" not in sc:
        return None
    return float(sc["baseline"]["avg_jct_s"] / sc[name]["avg_jct_s"])


def pollux_goals(report: Mapping[str, Any]) -> str:
    """docs/lyra.md, "Against the goals": Lyra against Basic and Baseline, run by run."""
    runs: Runs = report.get("runs", {})
    rows = _rows(runs)
    if not rows:
        return "(no runs)"
    n = len(rows)
    misses = [(k, g) for k, g in rows if not _three(g)]
    ties = [
        (k, g)
        for k, g in rows
        if g["met"]["queue_at_most_basic"]
        and g["queue_vs_basic"] is not None
        and g["queue_vs_basic"] < 1.0
    ]
    shorter = [g["jct_vs_basic"] for _, g in rows if g["jct_vs_basic"] > 1.0]
    out = [
        f"* **Lyra's mean queuing and mean JCT no greater than Basic's, preempted at most "
        f"5 %: all three met on {n - len(misses)} of {n} runs** (each job's restart priced "
        f"by the restart model, {_price(report)} for a job that states nothing)."
    ]
    if misses:
        out.append("  Missed on: " + "; ".join(_miss(k, g, runs[k]) for k, g in misses) + ".")
    if ties:
        out.append(
            f"  {len(ties)} more run{'s are' if len(ties) > 1 else ' is'} inside the 1 % tie "
            "on queuing ("
            + ", ".join(f"{k}: {_pct(1 / g['queue_vs_basic'] - 1)} longer" for k, g in ties)
            + ")."
        )
    out.append(
        f"  Lyra's mean JCT is below Basic's on {len(shorter)} of {n} runs"
        + (
            f" ({_span([100 * (1 - 1 / x) for x in shorter], '{:.1f}')} % shorter)."
            if shorter
            else "."
        )
    )
    pre: dict[str, list[float]] = {"lyra": [], "basic": []}
    for pair in runs.values():
        for name, xs in pre.items():
            if name in pair["scenarios"]:
                xs.append(pair["scenarios"][name]["preemption_ratio"])
    out.append(
        "* **Preemptions**: "
        + ", ".join(
            f"{name.capitalize()} {_span([100 * x for x in xs], '{:.1f}')} % of jobs "
            f"(mean {_pct(statistics.fmean(xs))})"
            for name, xs in pre.items()
            if xs
        )
        + "."
    )
    every, some, below = [], [], []
    for wl, keys in _by_workload(runs).items():
        xs = [x for x in (_jct_x(runs[k], "lyra") for k in keys) if x is not None]
        if not xs:
            continue
        hit = [x for x in xs if x >= 1.5]
        (every if len(hit) == len(xs) else some if hit else below).append((wl, xs, keys))
    names = ", ".join(wl.rpartition("-")[2] for wl, _, _ in every)
    line = (
        f"* **Baseline's mean JCT is at least 1.5× Lyra's on every seed of {len(every)} of the "
        f"{len(every) + len(some) + len(below)} workloads**"
    )
    if every:
        line += f" ({names}: {_span([x for _, xs, _ in every for x in xs])}×)"
    out.append(line + ".")
    for wl, xs, keys in some + below:
        seeds = ", ".join(f"{k.rpartition('/')[2]}: {_jct_x(runs[k], 'lyra'):.2f}×" for k in keys)
        ceil = []
        for name, label in (("ideal", "Ideal"), ("unlimited", "every server lendable")):
            c = [x for x in (_jct_x(runs[k], name) for k in keys) if x is not None]
            if c:
                ceil.append(f"{label} {_span(c)}×")
        b = runs[keys[0]]["scenarios"]
        bl, ly = b["baseline"], b["lyra"]
        out.append(
            f"  * **{wl}: {_span(xs)}×** by seed ({seeds}; {', '.join(ceil)}). On seed "
            f"{keys[0].rpartition('/')[2]} Baseline queues {_num(bl['avg_queue_s'])} s of "
            f"a {_num(bl['avg_jct_s'])} s mean JCT ({_pct(bl['avg_queue_s'] / bl['avg_jct_s'])})"
            f" and runs jobs for {_num(bl['mean_run_s'])} s on average; Lyra queues "
            f"{_num(ly['avg_queue_s'])} s and runs them for {_num(ly['mean_run_s'])} s."
        )
    lyra = [pair["scenarios"]["lyra"] for pair in runs.values() if "lyra" in pair["scenarios"]]
    basic = [pair["scenarios"]["basic"] for pair in runs.values() if "basic" in pair["scenarios"]]
    if lyra and basic:

        def util(xs: list[Mapping[str, Any]], k: str) -> float:
            return statistics.fmean(x[k] for x in xs if x.get(k) is not None)

        out.append(
            f"* **On-loan utilisation**: {_pct(util(lyra, 'on_loan_utilisation'))} on average "
            f"over the whole run (Basic {_pct(util(basic, 'on_loan_utilisation'))}), "
            f"{_pct(util(lyra, 'on_loan_utilisation_while_queued'))} while any job waits "
            f"(Basic {_pct(util(basic, 'on_loan_utilisation_while_queued'))})."
        )
    return "\n".join(out)


def held_out(report: Mapping[str, Any]) -> str:
    """docs/lyra.md, "How the defaults were chosen": the goals on the held-out runs."""
    runs: Runs = report.get("runs", {})
    rows = [(k, g) for k, g in _rows(runs) if runs[k].get("held_out")]
    seen = [(k, g) for k, g in _rows(runs) if not runs[k].get("held_out")]
    if not rows:
        return "(no held-out runs)"
    wls = sorted({k.rpartition("/")[0] for k, _ in rows}, key=lambda w: _sort_key(f"{w}/0"))

    def tally(xs: list[tuple[str, dict[str, Any]]]) -> str:
        bad = [k for k, g in xs if not _three(g)]
        miss = f" (missed on {', '.join(bad)})" if bad else ""
        return f"{len(xs) - len(bad)} of {len(xs)} runs{miss}"

    return (
        f"On the {len(wls)} held-out workloads Lyra meets all three goals on {tally(rows)}; "
        f"on the workloads that chose the defaults, on {tally(seen)}."
    )


def philly(report: Mapping[str, Any]) -> str:
    """docs/lyra.md, "The Philly windows": Lyra against Basic and the paper."""
    runs: Runs = report.get("runs", {})
    rows = _rows(runs)
    if not rows:
        return "(no runs)"
    n = len(rows)
    jct = sum(g["met"]["jct_at_most_basic"] for _, g in rows)
    queue = sum(g["met"]["queue_at_most_basic"] for _, g in rows)
    pre_ok = sum(g["met"]["preemption_at_most_5pct"] for _, g in rows)
    three = sum(_three(g) for _, g in rows)
    ly = [runs[k]["scenarios"]["lyra"] for k, _ in rows]
    ba = [runs[k]["scenarios"]["basic"] for k, _ in rows]
    bl = [runs[k]["scenarios"]["baseline"] for k, _ in rows]
    q_ratio = statistics.fmean(
        a["avg_queue_s"] / b["avg_queue_s"] for a, b in zip(ly, ba, strict=True)
    )
    pre = [x["preemption_ratio"] for x in ly]
    qx = statistics.fmean(b["avg_queue_s"] / a["avg_queue_s"] for a, b in zip(ly, bl, strict=True))
    jx = statistics.fmean(b["avg_jct_s"] / a["avg_jct_s"] for a, b in zip(ly, bl, strict=True))
    return (
        f"With the current defaults ({_price(report)} a restart for a job that states "
        f"nothing), on the {n} pairs: all three goals are met on {three}. Lyra's mean JCT "
        f"is at most Basic's (within the 1 % tie) on {jct} pairs, its mean queuing on "
        f"{queue} (Lyra's over Basic's {q_ratio:.3f} on average), and its preempted share "
        f"is at most 5 % on {pre_ok} ({_span([100 * x for x in pre], '{:.1f}')} %, mean "
        f"{_pct(statistics.fmean(pre))} against Basic's "
        f"{_pct(statistics.fmean(x['preemption_ratio'] for x in ba))}). Against the paper "
        f"(1.67× queuing and 1.59× JCT over Baseline, 7.35 % preempted against Basic's "
        f"12.24 %), Lyra's mean ratios over Baseline here are {qx:.2f}× on queuing and "
        f"{jx:.2f}× on JCT."
    )


# ---------------------------------------------------------------------------- ablation


def _t(doc: Mapping[str, Any], suite: str, key: str) -> Mapping[str, Any] | None:
    got: Mapping[str, Any] | None = doc.get(suite, {}).get(key)
    return got


_FIELDS = (
    ("all", "all three goals met on {} of {n}"),
    ("queue", "queuing goal on {} of {n}"),
    ("jct", "JCT goal on {} of {n}"),
    ("preempted", "preemption goal on {} of {n}"),
    ("queue_geo", "queuing vs Basic {:.3f}"),
    ("jct_geo", "JCT vs Basic {:.3f}"),
    ("max_preempted", "worst run preempting {}"),
)


def _diff(doc: Mapping[str, Any], key: str, suite: str) -> str | None:
    """Where ``key`` differs from the defaults on ``suite``: "variant (defaults)" per
    figure, or None when the suite was not run."""
    a, d = _t(doc, suite, key), _t(doc, suite, "lyra")
    if a is None or d is None:
        return None

    def f(t: Mapping[str, Any], field: str, fmt: str) -> str:
        v = t[field]
        return fmt.format(_pct(v) if field == "max_preempted" else v, n=t["runs"])

    got = []
    for field, fmt in _FIELDS:
        x, y = f(a, field, fmt), f(d, field, fmt)
        if x != y:
            yv = d[field]
            ref = (
                _pct(yv)
                if field == "max_preempted"
                else (f"{yv:.3f}" if isinstance(yv, float) else str(yv))
            )
            got.append(f"{x} ({ref})")
    return ", ".join(got) if got else "the defaults' figures"


def restart_prices() -> tuple[float, float]:
    """The cheapest and dearest restart of the Pollux applications (their checkpoints)."""
    xs = [restart_s(MEASURED, mb) for mb in CHECKPOINT_MB.values()]
    return min(xs), max(xs)


def ablation(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md's ablation, part by part: each variant against the defaults (first
    figure the variant's, second the defaults')."""
    labels = doc.get("labels", {})
    if "lyra" not in doc.get("pollux", {}):
        return "(no ablation runs)"
    price = doc.get("restart_s", {})
    parts = {k: price.get(k) for k in ("pollux", "philly", "sensitivity", "noise")}
    if len({v for v in parts.values()}) == 1:
        made = f"Every part ran with the restart model's default price: {_p(parts['pollux'])}."
    else:
        made = (
            "The parts ran with different default restart prices: "
            + ", ".join(f"{k} {_p(v)}" for k, v in parts.items())
            + "."
        )
    lo, hi = restart_prices()
    out = [
        made + f" A Pollux application's restart is priced at {lo:.1f}–{hi:.1f} s "
        "(its checkpoint written and read back).",
        "",
        "What each part changes against the defaults (the defaults' figure in brackets;"
        " vs Basic: geometric mean of Lyra's over Basic's, < 1 is Lyra ahead):",
        "",
    ]
    for key in doc.get("order", list(labels)):
        if key == "lyra" or key not in labels:
            continue
        cells = []
        for suite, unit in (("pollux", "Pollux"), ("philly", "Philly")):
            d = _diff(doc, key, suite)
            if d is not None:
                cells.append(f"{unit}: {d}")
        out.append(f"* **{labels[key]}**: " + "; ".join(cells) + ".")
    return "\n".join(out)


def _p(v: float | None) -> str:
    return (
        "not recorded (made before the price was recorded: the former 25.2 s)"
        if v is None
        else f"{v:g} s"
    )


def sensitivity(doc: Mapping[str, Any]) -> str:
    """docs/lyra.md, "How far they carry": Lyra's defaults on other seeds and pools."""
    sens: Mapping[str, Mapping[str, Any]] = doc.get("sensitivity", {})
    if not sens:
        return "(no sensitivity runs)"
    ts = list(sens.values())
    n = ts[0]["runs"]
    worse_q = [(k, t) for k, t in sens.items() if t["queue_geo"] > TIE]
    over = [(k, t) for k, t in sens.items() if t["preempted"] < t["runs"]]
    line = (
        f"Over these regimes Lyra meets all three goals on {_span([t['all'] for t in ts], '{}')} "
        f"of {n} runs per regime. Its mean JCT is at or below Basic's on "
        f"{_span([t['jct'] for t in ts], '{}')} of {n} (geometric mean "
        f"{_span([t['jct_geo'] for t in ts])} of Basic's), its mean queuing on "
        f"{_span([t['queue'] for t in ts], '{}')} (geometric mean "
        f"{_span([t['queue_geo'] for t in ts])})."
    )
    if over:
        line += (
            " Its preempted share passes 5 % on "
            + ", ".join(
                f"{t['runs'] - t['preempted']} run{'s' if t['runs'] - t['preempted'] > 1 else ''} "
                f"of regime “{k}”"
                for k, t in over
            )
            + f" (at most {_pct(max(t['max_preempted'] for _, t in over))})."
        )
    else:
        line += (
            " Its preempted share stays at most 5 % on every run "
            f"(at most {_pct(max(t['max_preempted'] for t in ts))})."
        )
    if worse_q:
        line += (
            " Lyra queues longer than Basic on average (geometric mean) in "
            + ", ".join(
                f"regime “{k}” ({_pct(t['queue_geo'] - 1)} longer, "
                f"JCT {_longer(t['jct_geo'], 1.0)})"
                for k, t in worse_q
            )
            + "."
        )
    return line
