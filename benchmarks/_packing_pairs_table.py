"""Markdown for ``benchmarks/results/packing_pairs.json`` (``<!-- packing-pairs -->`` in
docs/gavel.md): pruned vs every pair, per size and packed policy."""

from __future__ import annotations

from typing import Any

SHORT = {
    "max_min_fairness_packed": "max-min (LAS)",
    "min_total_duration_packed": "makespan",
    "max_min_fairness_water_filling_packed": "water filling",
    "finish_time_fairness_packed": "finish-time fairness (ρ, min)",
    "max_sum_throughput_normalized_by_cost_packed_SLOs": "cost with SLOs",
}


def _pct(x: float) -> str:
    """A percentage; solver noise below 0.005 % reads 0.00 % (not "-0.00 %")."""
    return f"{x:.2%}" if abs(x) >= 5e-5 else "0.00%"


def render(data: dict[str, Any]) -> str:
    t = data["target"]
    lines = [
        f"`{data['command']}`, {data['cluster']}, seed {data['seed']}, median of "
        f"{data['repeats']} whole `allocate` calls (load average at start "
        f"{data['load_avg_at_start'][0]:.1f}, {data['machine']['cpus']} CPUs). "
        "Shortfall: how much worse the pruned objective is than the full one; "
        "moved: jobs whose time per type (alone and paired) differs, and the mean L1 "
        "distance of that time per job; throughput: each job's steps/s pruned ÷ full.",
        "",
        "| jobs | pairs pruned / all / Gavel's | policy | s pruned | s all "
        "| all ÷ pruned | objective pruned / all | shortfall | moved (mean L1) "
        "| throughput min / median / max |",
        "|---:|---|---|---:|---:|---:|---|---:|---|---|",
    ]
    for n, row in data["sizes"].items():
        pc = row["pairs"]
        pairs = f"{pc['pruned']:,} / {pc['all_positive']:,} / {pc['gavel_same_scale_factor']:,}"
        for name, r in sorted(row["policies"].items()):
            lines.append(
                f"| {int(n):,} | {pairs} | {SHORT.get(name, name)} "
                f"| {r['pruned_median_s']:.3f} | {r['all_median_s']:.3f} | {r['speedup']:.1f}x "
                f"| {r['pruned_objective']:.4g} / {r['all_objective']:.4g} "
                f"| {_pct(r['pruned_shortfall'])} "
                f"| {r['jobs_time_changed']} of {r['jobs']} ({r['time_l1_mean']:.3f}) "
                f"| {r['throughput_ratio_min']:.2f} / {r['throughput_ratio_median']:.2f} "
                f"/ {r['throughput_ratio_max']:.2f} |"
            )
    spread = [
        f"{int(n):,} jobs: {row['pairs']['pruned_jobs_with_partners']} jobs with a partner, "
        f"the busiest with {row['pairs']['pruned_max_partners']}"
        for n, row in data["sizes"].items()
        if "pruned_max_partners" in row["pairs"]
    ]
    if spread:
        lines += ["", f"Pruned pairs per job: {'; '.join(spread)}."]
    for n, row in data["sizes"].items():
        sweep = row.get("las_top_k_sweep")
        if sweep:
            steps = "; ".join(
                f"{s['top_k']}: {s['pairs']:,} pairs, {s['seconds']:.2f} s, "
                f"{_pct(s['shortfall'])} short"
                for s in sweep
            )
            lines += ["", f"Packed LAS at {int(n):,} jobs by partners per job (`top_k`): {steps}."]
    within = data.get("all_within_target_at_512", {})
    if within:
        ok = sorted(SHORT.get(k, k) for k, v in within.items() if v)
        lines += [
            "",
            f"Full pair set within {t['seconds']} s at {t['jobs']} jobs: "
            f"{', '.join(ok) if ok else 'none'} ({len(ok)} of {len(within)}).",
        ]
    return "\n".join(lines) + "\n"
