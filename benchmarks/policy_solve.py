"""Solve time of every Gavel policy: our sparse HiGHS LPs vs the plain cvxpy reference.

Instances: n jobs on k80/p100/v100 with n/4 GPUs of each type; job types drawn uniformly
from Gavel's throughput catalogue (scale factors 1/2/4/8), 8 users, weights 1 or 2 —
Gavel's own generator's recipe. Both sides solve the same instance in the same run; the
JSON records both times, their ratio, both objective values and their relative gap. The
cvxpy reference runs only up to ``REF_MAX_N`` per policy (it is slow by design; the
JSON says where it was skipped). Without ../shared/data the synthetic throughputs of
:mod:`tests.gavel_builders` are used (and the JSON says so).
Importing from tests/ is deliberate (the repo root is on sys.path): the package ships no fixtures.

    .venv/bin/python benchmarks/policy_solve.py [--sizes 64,256,1024,2048] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from lyra_ray.model import ClusterSnapshot  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.policies.gavel import reference_cvxpy as ref  # noqa: E402
from lyra_ray.policies.gavel.cost import DEFAULT_PRICES, prices, slo_floors  # noqa: E402
from lyra_ray.policies.gavel.finish_time_fairness import solve_ftf  # noqa: E402
from lyra_ray.policies.gavel.inputs import build_problem  # noqa: E402
from lyra_ray.policies.gavel.max_min_fairness import las_coefficients, solve_las  # noqa: E402
from lyra_ray.policies.gavel.max_sum_throughput import solve_sum  # noqa: E402
from lyra_ray.policies.gavel.min_total_duration import solve_makespan  # noqa: E402
from lyra_ray.policies.gavel.packed import _las_scale, solve_packed_las  # noqa: E402
from lyra_ray.policies.gavel.pairs import candidate_pairs  # noqa: E402
from lyra_ray.policies.gavel.water_filling import hierarchical_weights, solve_water_filling  # noqa: E402
from tests.gavel_builders import random_snapshot  # noqa: E402

SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
TARGETS_2048 = {
    "max_min_fairness_perf": 0.1,
    "max_min_fairness": 0.1,
    "min_total_duration_perf": 0.1,
    "max_sum_throughput_perf": 0.1,
    "max_sum_throughput_normalized_by_cost_perf_SLOs": 0.1,
    "finish_time_fairness_perf": 0.4,
    "max_min_fairness_water_filling_perf": 3.0,
}
PACKED_N = 512
PACKED_TARGET_S = 2.0
REF_MAX_N = {"default": 2048, "max_min_fairness_water_filling_perf": 64}


def make_snapshot(n: int, seed: int) -> tuple[ClusterSnapshot, str]:
    path = SHARED / "gavel" / "simulation_throughputs.json"
    if path.exists():
        from lyra_ray.model.throughput import load_gavel_throughputs

        model = load_gavel_throughputs(path)
        types = sorted(model.job_types)
        return random_snapshot(n, seed, catalogue=model, job_types=types), "gavel catalogue"
    return random_snapshot(n, seed), "synthetic"


SOLVER = {"max_min_fairness_perf": "ecos", "max_min_fairness": "ecos"}
"""Policies not solved by HiGHS (see policies/gavel/ecos_las.py)."""


def timed(fn: Callable[[], float]) -> tuple[float, float]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, float(value)


def cases(snap: ClusterSnapshot) -> dict[str, tuple[Callable[[], float], Callable[[], float]]]:
    """policy -> (ours: returns objective, cvxpy reference: returns objective)."""
    p = build_problem(snap)
    pa = build_problem(snap, agnostic=True)
    cost = prices(p, DEFAULT_PRICES)
    floors = slo_floors(p, snap.now)

    def ours_las() -> float:
        get_policy("max_min_fairness_perf").allocate(snap)
        return solve_las(build_problem(snap), agnostic=False)[1]

    def ours_wf() -> float:
        X, _ = solve_water_filling(build_problem(snap), agnostic=False)
        coef = las_coefficients(p, False) * (p.weights / hierarchical_weights(p))[:, None]
        return float((coef * X).sum(axis=1)[p.runnable.any(axis=1)].min())

    wf_coef = las_coefficients(p, False) * (p.weights / hierarchical_weights(p))[:, None]
    return {
        "max_min_fairness_perf": (
            lambda: solve_las(build_problem(snap), agnostic=False)[1],
            lambda: ref.las_level(p, las_coefficients(p, False)),
        ),
        "max_min_fairness": (
            lambda: solve_las(build_problem(snap, agnostic=True), agnostic=True)[1],
            lambda: ref.las_level(pa, las_coefficients(pa, True)),
        ),
        "finish_time_fairness_perf": (
            lambda: solve_ftf(build_problem(snap), snap.now)[1],
            lambda: ref.ftf_rho(p, snap.now),
        ),
        "min_total_duration_perf": (
            lambda: solve_makespan(build_problem(snap))[1],
            lambda: ref.makespan(p),
        ),
        "max_sum_throughput_perf": (
            lambda: solve_sum(build_problem(snap))[1],
            lambda: ref.sum_throughput(p),
        ),
        "max_sum_throughput_normalized_by_cost_perf_SLOs": (
            lambda: solve_sum(build_problem(snap), cost=cost, min_throughput=floors)[1],
            lambda: ref.sum_throughput(p, cost, floors),
        ),
        "max_min_fairness_water_filling_perf": (
            ours_wf,
            lambda: float(ref.water_filling(p, wf_coef)[p.runnable.any(axis=1)].min()),
        ),
    }


def packed_case(snap: ClusterSnapshot) -> dict[str, Any]:
    p = build_problem(snap)
    t_ours, level = timed(lambda: solve_packed_las(snap, p)[1])
    pairs = candidate_pairs(snap, p)
    t_ref, level_ref = timed(
        lambda: ref.packed_las_level(p, pairs.idx, pairs.thr, pairs.gpus, _las_scale(p))
    )
    return {
        "n": p.n,
        "pairs_kept": pairs.size,
        "pairs_possible": p.n * (p.n - 1) // 2,
        "ours_s": t_ours,
        "cvxpy_s": t_ref,
        "speedup": t_ref / t_ours,
        "objective_ours": level,
        "objective_cvxpy": level_ref,
        "rel_gap": abs(level - level_ref) / max(1e-12, abs(level_ref)),
        "target_s": PACKED_TARGET_S,
        "gavel_reported_s": 52.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="64,256,1024,2048")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref-max-n", type=int, default=REF_MAX_N["default"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "policy_solve.json"))
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_at_start": os.getloadavg(),
        "cluster": "k80/p100/v100, n/4 GPUs each",
        "results": {},
    }
    for n in sizes:
        snap, source = make_snapshot(n, args.seed)
        out["instances"] = source
        row: dict[str, Any] = {}
        for name, (ours, reference) in cases(snap).items():
            timed(ours)  # warm-up (imports, first-call allocations)
            t_ours, obj = timed(ours)
            entry: dict[str, Any] = {
                "solver": SOLVER.get(name, "highs"),
                "ours_s": t_ours,
                "objective_ours": obj,
            }
            limit = min(args.ref_max_n, REF_MAX_N.get(name, REF_MAX_N["default"]))
            if n <= limit:
                t_ref, obj_ref = timed(reference)
                entry.update(
                    cvxpy_s=t_ref,
                    speedup=t_ref / t_ours,
                    objective_cvxpy=obj_ref,
                    rel_gap=abs(obj - obj_ref) / max(1e-12, abs(obj_ref)),
                )
            else:
                entry["cvxpy_s"] = None
                entry["cvxpy_skipped"] = f"reference run only up to n={limit} (too slow)"
            if n == 2048 and name in TARGETS_2048:
                entry["target_s"] = TARGETS_2048[name]
                entry["meets_target"] = t_ours <= TARGETS_2048[name]
            row[name] = entry
            print(
                f"n={n:5d} {name:50s} {entry['solver']:5s} {t_ours:8.4f}s  cvxpy {entry['cvxpy_s']}"
            )
        for name in ("allox", "gandiva", "isolated", "fifo_perf"):
            t, _ = timed(lambda name=name, snap=snap: float(bool(get_policy(name).allocate(snap))))
            row[name] = {"ours_s": t, "cvxpy_s": None, "cvxpy_skipped": "no LP reference"}
        out["results"][str(n)] = row
    snap, _ = make_snapshot(PACKED_N, args.seed)
    out["packed_max_min_fairness_512"] = packed_case(snap)
    print("packed LAS @512:", json.dumps(out["packed_max_min_fairness_512"]))
    out["load_avg_at_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, default=float) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
