"""Small tables of docs/ rendered from their results JSON (docs-table registry).

Why here and not in each benchmark: those scripts import Ray, torch or the solvers at
the top, and the docs test must render every table with none of that loaded. Each
function takes the parsed JSON and returns the markdown between its doc's markers.
"""

from __future__ import annotations

from typing import Any

_SOLVER = {"ecos": "ECOS", "highs": "HiGHS"}


def _s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.3g}"


def policy_solve(d: dict[str, Any]) -> str:
    """docs/gavel.md's solve-time table: every policy with a target, seconds per size,
    ours beside cvxpy's at the largest; then packed LAS at 512 jobs."""
    sizes = sorted(d["results"], key=int)
    last = d["results"][sizes[-1]]
    head = " | ".join(f"{int(n):,}" for n in sizes[:-1])
    n = f"{int(sizes[-1]):,}"
    rows = [
        f"| policy | solver | {head} | {n} (ours / cvxpy) | target @{n} |",
        "|---|---|" + "---:|" * (len(sizes) + 1),
    ]
    for name, r in last.items():
        if "target_s" not in r:
            continue
        cells = [_s(d["results"][n][name]["ours_s"]) for n in sizes[:-1]]
        ref = "—" if r.get("cvxpy_s") is None else _s(r["cvxpy_s"])
        rows.append(
            f"| `{name}` | {_SOLVER.get(r['solver'], r['solver'])} | {' | '.join(cells)} "
            f"| {_s(r['ours_s'])} / {ref} | {r['target_s']:.1f} s |"
        )
    p = d["packed_max_min_fairness_512"]
    rows += [
        "",
        f"Packed LAS at {p['n']} jobs: {p['ours_s']:.2f} s (target {p['target_s']:g} s; Gavel "
        f"{p['gavel_reported_s']:g} s), {p['pairs_kept']} of {p['pairs_possible']:,} pairs "
        "kept, objective equal to the cvxpy reference on the same pairs "
        f"(gap {p['rel_gap']:.0e}).",
    ]
    return "\n".join(rows)


def planner_speed(d: dict[str, Any]) -> str:
    """docs/planner.md's search-time table: pruned against exhaustive, per model."""
    rows = ["| model | GPUs | pruned | exhaustive | ratio |", "|---|---|---|---|---|"]
    for c in d["cases"]:
        name = c["model"].replace("gpt-", "GPT-").replace("b", "B").replace("t", "T")
        rows.append(
            f"| {name} | {c['gpus']} {c['gpu'].upper()} | {c['pruned_s'] * 1e3:.0f} ms "
            f"| {c['exhaustive_s'] * 1e3:.0f} ms | {c['speedup']:.1f}x |"
        )
    return "\n".join(rows)


def moe_plan(d: dict[str, Any]) -> str:
    """docs/moe.md's planner table: max/mean device load (mean over layers / worst
    layer) per planner and file, and the median plan times."""
    rows = [
        "| file | ours | EPLB-global | EPLB-hierarchical (8 groups, 4 nodes) "
        "| plan time ours vs EPLB-global |",
        "|---|---|---|---|---|",
    ]
    for f in d["files"]:
        name = f["file"].removeprefix("deepseek_v3_expert_load_").removesuffix(".json")
        cells = [
            f"{f[k]['max_over_mean']:.4f} / {f[k]['max_over_mean_worst']:.4f}"
            for k in ("lina", "eplb-global", "eplb-hierarchical")
        ]
        ours, ref = f["lina"]["plan_s_median"], f["eplb-global"]["plan_s_median"]
        rows.append(
            f"| {name} | {' | '.join(cells)} | {ours * 1e3:.0f} vs {ref * 1e3:.0f} ms "
            f"({f['lina_vs_eplb_global']['plan_speedup_median']:.1f}×) |"
        )
    return "\n".join(rows)


def live_overhead(d: dict[str, Any]) -> str:
    """docs/observability.md's table: scheduling cycles with and without the export."""

    def ms(k: str) -> str:
        return f"{d[k] * 1e3:.1f} ms"

    return "\n".join(
        [
            "| | cycle p50 | cycle p99 |",
            "|---|---|---|",
            f"| metrics exported | {ms('cycle_with_metrics_p50_s')} "
            f"| {ms('cycle_with_metrics_p99_s')} |",
            f"| not exported | {ms('cycle_without_metrics_p50_s')} "
            f"| {ms('cycle_without_metrics_p99_s')} |",
            f"| ratio (p50) | **{d['ratio_with_over_without_metrics_p50']:.3f}x** | |",
            f"| the export's own time per cycle | {d['metrics_export_p50_s'] * 1e3:.2f} ms "
            f"| {d['metrics_export_p99_s'] * 1e3:.2f} ms |",
        ]
    )


def moe_serving(d: dict[str, Any]) -> str:
    """docs/moe.md's popularity-based vs uniform placement on the MoE service (a real
    architecture, devices computing on CPUs) under loans: latency per traffic phase and
    arm, the measured p95 ratios, closed-loop throughput, then the token-only ideal."""
    arms = d["arms"]
    names = {
        "uniform": "uniform",
        "popularity": "popularity",
        "popularity_borrow": "popularity + borrowing",
    }
    phases = {"high": "high (both servers)", "low": "low (one lent)", "high_again": "high again"}
    phases["all"] = "whole open-loop run"
    s = d["setup"]
    model = arms["popularity"].get("model") or {}

    def lat(arm: str, p: str) -> str:
        x = arms[arm]["latency"][p]
        return f"{x['p50_ms']:.0f} / {x['p95_ms']:.0f}"

    rows = [
        f"{model.get('class', s['arch'])} ({s['layers']} MoE layers x {s['experts']} experts, "
        f"top-{s['top_k']}, expert {s['dim']}x{s['hidden']}), routers calibrated to "
        f"{s['popularity']} mapped onto its experts; device time {d['device_time']}; "
        f"{s['tokens_per_request']:,} tokens a request, {s['slots']} slots per GPU, "
        f"{s['high_rps']:g} / {s['low_rps']:g} req/s, {s['cpus']} CPUs (1-minute load "
        f"{min(min(a['host_load_1m']) for a in arms.values()):g}–"
        f"{max(max(a['host_load_1m']) for a in arms.values()):g} during the arms), "
        f"{d['when']}. "
        f"Command: `{d['command'].strip()}`.",
        "",
        "| traffic phase | requests | "
        + " | ".join(f"{names[a]} p50 / p95 ms" for a in arms)
        + " | p95 uniform / popularity | p95 uniform / popularity + borrowing | failed |",
        "|---|---|" + "---|" * len(arms) + "---|---|---|",
    ]
    for p, name in phases.items():
        ratios = [d["measured_p95_ratio"][a][p] for a in ("popularity", "popularity_borrow")]
        failed = sum(sum(arms[a]["latency"][p]["failures"].values()) for a in arms)
        rows.append(
            f"| {name} | {arms['uniform']['latency'][p]['requests']} | "
            + " | ".join(lat(a, p) for a in arms)
            + " | "
            + " | ".join(f"**{r:.2f}×**" if r else "—" for r in ratios)
            + f" | {failed} |"
        )
    thr = {a: arms[a]["throughput"] for a in arms}
    t = thr["uniform"]
    rows += [
        "",
        f"| closed loop, both servers ({t['clients']} senders, {t['seconds']:g} s) | "
        + " | ".join(names[a] for a in arms)
        + " |",
        "|---|" + "---|" * len(arms),
        "| requests / s | "
        + " | ".join(
            f"{thr[a]['req_per_s']:.2f}"
            + (f" (**{d['measured_throughput_ratio'][a]:.2f}×**)" if a != "uniform" else "")
            for a in arms
        )
        + " |",
    ]
    budgets = "; ".join(
        f"{names[a]} " + " → ".join(str(r["budget_per_layer"]) for r in arm["replans"])
        for a, arm in arms.items()
    )
    rows += [
        "",
        f"Replica budget per layer at each re-plan during the open-loop phases: {budgets}.",
    ]
    if d["ideal"]:
        rows += [
            "",
            "| ideal (`bottleneck.py`, tokens only) | replicas uniform → popularity "
            "| busiest replica's tokens | unloaded p95 |",
            "|---|---|---|---|",
        ]
        for key, name in (("both_servers", "4 GPUs (both servers)"), ("one_server", "2 GPUs")):
            if key not in d["ideal"]:
                continue
            i = d["ideal"][key]
            counts = f"`{i['uniform_counts']}` → `{i['popularity_counts']}`".replace(" ", "")
            rows.append(
                f"| {name} | {counts} | {i['tokens_busiest_replica']:.2f}× "
                f"| {i['unloaded_p95_tokens']:.2f}× |"
            )
    return "\n".join(rows)


H200_PEAK = {"bandwidth_TBps": 4.8, "flops_TFLOPs": 989.0}
"""H200 datasheet peaks (HBM3e bandwidth, dense bf16), the scale beside the fit."""


def moe_expert_fit(d: dict[str, Any]) -> str:
    """docs/moe.md's fitted H200 constants, each beside what gives it scale."""
    f = d["shipped"]
    bw, fl = f["bandwidth_TBps"], f["flops_TFLOPs"]
    return "\n".join(
        [
            "| H200 constant | fitted | for scale |",
            "|---|---|---|",
            f"| bandwidth | {bw:.2f} TB/s | {100 * bw / H200_PEAK['bandwidth_TBps']:.0f} % of "
            f"the {H200_PEAK['bandwidth_TBps']:g} TB/s peak |",
            f"| flops | {fl:.0f} TFLOP/s | {100 * fl / H200_PEAK['flops_TFLOPs']:.0f} % of the "
            f"~{H200_PEAK['flops_TFLOPs']:.0f} TFLOP/s dense bf16 peak |",
            f"| floor | {f['floor_us']:.1f} µs | one eager expert call (five kernels) |",
            f"| overlap `p` | {f['overlap']:.2f} | smooth max of weight reads and compute |",
        ]
    )


def _lat(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s" if ms < 10_000 else f"{ms / 1000:.1f} s"


def live_loaning(d: dict[str, Any]) -> str:
    """docs/loaning.md's table: loaning off and on over the same compressed day, every
    reclaim's latency named (two or three samples make a p50 meaningless alone)."""
    off, on = d["off"], d["on"]

    def jct(r: dict[str, Any]) -> str:
        if r["mean_jct_s"] is None:
            return "-"
        return f"{r['mean_jct_s']:.0f} s / {r['mean_queue_s']:.0f} s"

    def failed(r: dict[str, Any]) -> str:
        n, why = r["inference"]["failed"], r["inference"]["failures_by_reason"]
        if not n:
            return "0"
        reasons = ", ".join(f"{k}s" if v == n else f"{v} {k}" for k, v in sorted(why.items()))
        return f"**{n}** ({reasons})"

    def reclaims(r: dict[str, Any]) -> str:
        lat = r.get("reclaim_latencies_s")
        if lat is None and r["reclaims"]:  # a run from before each latency was stored
            return f"{r['reclaims']}: p50 {r['reclaim_latency_p50_s']:.1f} s (each not stored)"
        if not lat:
            return "-"
        each = [f"{x:.1f} s" for x in lat]
        text = f"{len(lat)}: " + (" and ".join(each) if len(each) <= 2 else ", ".join(each))
        if len(lat) > 2:
            p50, top = r["reclaim_latency_p50_s"], r["reclaim_latency_max_s"]
            text += f" (p50 {p50:.1f} s, max {top:.1f} s)"
        return text

    def util(r: dict[str, Any]) -> str:
        u = r["on_loan_utilisation"]
        return "-" if u is None else f"{100 * u:.0f} %"

    def inf(r: dict[str, Any]) -> str:
        return f"{_lat(r['inference']['p50_ms'])} / {_lat(r['inference']['p99_ms'])}"

    counts = {off["inference"]["count"], on["inference"]["count"]}
    of = " or ".join(f"{c:,}" for c in sorted(counts))
    ratio = d["gpu_s_ratio_on_over_off"]
    return "\n".join(
        [
            "| | loaning off | loaning on | goal |",
            "|---|---|---|---|",
            f"| training GPU-seconds during the day | {off['training_gpu_s_during_day']:.0f} "
            f"| {on['training_gpu_s_during_day']:.0f} (**{ratio:.2f}x**) | >= 1.3x |",
            f"| mean JCT / mean queuing ({on['jobs']} jobs) | {jct(off)} | {jct(on)} | |",
            f"| inference p50 / p99 | {inf(off)} | {inf(on)} | |",
            f"| failed requests (of {of}) | {failed(off)} | {failed(on)} | 0 |",
            f"| reclaims, latency (demand rise to serving) | {reclaims(off)} | {reclaims(on)} "
            "| p99 <= grace + 30 s = 60 s |",
            f"| on-loan utilisation (sampled) | {util(off)} | {util(on)} | toward ~93 % |",
        ]
    )


def sim_speed_interpreters(d: dict[str, Any]) -> str:
    """docs/gavel.md's interleaved replay timings, two commits on two interpreters."""
    out = [
        "| code | " + " | ".join(d["interpreters"]) + " |",
        "|---|" + "---:|" * len(d["interpreters"]),
    ]
    for r in d["rows"]:
        bold = r.get("bold", [False] * len(r["cpu_s"]))
        cells = []
        for c, b in zip(r["cpu_s"], bold, strict=True):
            text = f"{c['median']:.1f} s ({c['min']:.1f}–{c['max']:.1f})"
            cells.append(f"**{text}**" if b else text)
        out.append(f"| {r['code']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


GUARD_LABELS = {
    "basic": "Basic",
    "lyra": "Lyra as evaluated (`lend_after_s=1800`, 4-h rule)",
    "lend_after_600": "`lend_after_s=600`",
    "no_4h_rule": "no 4-h rule",
    "no_guard": "no guard at all",
}


def lyra_guards(d: dict[str, Any]) -> str:
    """docs/lyra.md's guards table (``benchmarks/lyra_guards.py``), indented: it sits in a
    list item. Per variant and window: mean queuing s / mean JCT s / preempted."""
    runs = d["runs"]
    windows = sorted({int(k.split("/")[0]) for k in runs})
    rows = ["| | " + " | ".join(str(w) for w in windows) + " |", "|---|" + "---|" * len(windows)]
    for name in d["variants"]:
        cells = []
        for w in windows:
            r = runs[f"{w}/{name}"]
            cells.append(
                f"{r['avg_queue_s']:,.0f} / {r['avg_jct_s']:,.0f} / "
                f"{100 * r['preemption_ratio']:.1f} %"
            )
        rows.append(f"| {GUARD_LABELS.get(name, name)} | " + " | ".join(cells) + " |")
    return "\n".join("  " + r for r in rows)
