"""Average JCT of every Gavel policy on Gavel's traces, heterogeneity-aware vs agnostic.

Runs each policy through the real simulator (``lyra simulate``'s code path: core, round
mechanism, SimRuntime) and writes ``benchmarks/results/gavel_table.json`` plus the
markdown table between the ``<!-- gavel-table -->`` markers of docs/gavel.md.

Traces (kept modest so the script runs in a few minutes on 2 cores):
* ``max_min_fairness.trace`` (96 jobs, continuous arrivals) on v100=8,p100=16,k80=24 —
  the setting of Gavel's fidelity numbers (19,989 s and 14,623 s for LAS / LAS_perf);
* ``minimize_makespan.trace`` (100 jobs, all at t=0) on the same cluster;
* the first ``--continuous N`` (default 300; 0 skips) jobs of
  ``generated_continuous_multiple_seed0_lam1800_2000jobs.trace`` on 36/36/36
  (a subsample: the whole trace takes minutes per policy).

    .venv/bin/python benchmarks/gavel_table.py [--continuous 300]   # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.model.spec import parse_cluster  # noqa: E402
from lyra_ray.model.throughput import load_gavel_throughputs  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.sim.simulator import Simulator  # noqa: E402
from lyra_ray.sim.traces import read_gavel_trace  # noqa: E402

SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data")) / "gavel"
PAIRS = [  # (family, agnostic, heterogeneity-aware)
    ("LAS (max-min fairness)", "max_min_fairness", "max_min_fairness_perf"),
    ("Finish-time fairness", "finish_time_fairness", "finish_time_fairness_perf"),
    ("FIFO", "fifo", "fifo_perf"),
    ("Makespan", "min_total_duration", "min_total_duration_perf"),
    (
        "Hierarchical (water-filling)",
        "max_min_fairness_water_filling",
        "max_min_fairness_water_filling_perf",
    ),
]
SINGLES = [
    "fifo_packed",
    "max_min_fairness_packed",
    "finish_time_fairness_packed",
    "min_total_duration_packed",
    "max_min_fairness_water_filling_packed",
    "max_sum_throughput_normalized_by_cost_packed_SLOs",
    "max_sum_throughput_perf",
    "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
    "isolated",
    "gandiva",
    "allox",
]
GAVEL_REPORTED = {
    ("max_min_fairness.trace", "max_min_fairness"): 19989.0,
    ("max_min_fairness.trace", "max_min_fairness_perf"): 14623.0,
}


def simulate(trace: Path, cluster: str, policy: str, max_jobs: int | None) -> dict[str, Any]:
    model = load_gavel_throughputs(SHARED / "simulation_throughputs.json")
    specs = read_gavel_trace(trace, known_job_types=model.job_types)
    if max_jobs is not None:
        specs = specs[:max_jobs]
    sim = Simulator(parse_cluster(cluster, 1), get_policy(policy), model, round_s=360.0)
    t0 = time.perf_counter()
    res = sim.run(specs)
    return {
        "avg_jct_s": res.summary["avg_jct_s"],
        "completed_jobs": res.summary["completed_jobs"],
        "wall_s": time.perf_counter() - t0,
    }


def markdown(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = []
    for trace, rows in results.items():
        lines.append(f"**{trace}**\n")
        lines.append("| policy family | agnostic avg JCT (h) | het-aware avg JCT (h) | speed-up |")
        lines.append("|---|---:|---:|---:|")
        for family, ag, aw in PAIRS:
            a, w = rows[ag]["avg_jct_s"], rows[aw]["avg_jct_s"]
            lines.append(
                f"| {family} (`{ag}` / `{aw}`) | {a / 3600:.2f} | {w / 3600:.2f} | {a / w:.2f}x |"
            )
        lines.append("\n| other policy | avg JCT (h) |")
        lines.append("|---|---:|")
        for name in SINGLES:
            lines.append(f"| `{name}` | {rows[name]['avg_jct_s'] / 3600:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--continuous", type=int, default=300, help="jobs of the 2,000-job trace")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gavel_table.json"))
    args = ap.parse_args()
    if not SHARED.exists():
        print(f"skipped: {SHARED} not found")
        return 0
    runs: list[tuple[str, str, int | None]] = [
        ("max_min_fairness.trace", "v100=8,p100=16,k80=24", None),
        ("minimize_makespan.trace", "v100=8,p100=16,k80=24", None),
    ]
    if args.continuous:
        runs.append(
            (
                "generated_continuous_multiple_seed0_lam1800_2000jobs.trace",
                "v100=36,p100=36,k80=36",
                args.continuous,
            )
        )
    policies = [p for _, a, w in PAIRS for p in (a, w)] + SINGLES
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for trace, cluster, max_jobs in runs:
        label = trace if max_jobs is None else f"{trace} (first {max_jobs} jobs)"
        label += f" on {cluster}"
        rows: dict[str, dict[str, Any]] = {}
        for policy in policies:
            r = simulate(SHARED / "traces" / trace, cluster, policy, max_jobs)
            if (trace, policy) in GAVEL_REPORTED:
                r["gavel_avg_jct_s"] = GAVEL_REPORTED[(trace, policy)]
                r["rel_diff_vs_gavel"] = r["avg_jct_s"] / r["gavel_avg_jct_s"] - 1
            rows[policy] = r
            print(f"{label:70s} {policy:50s} {r['avg_jct_s']:10.0f} s  ({r['wall_s']:.1f} s wall)")
        results[label] = rows
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    if Path(args.out) == ROOT / "benchmarks" / "results" / "gavel_table.json":
        from benchmarks.docs_tables import table

        table("gavel-table").write()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
