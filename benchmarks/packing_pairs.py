"""Packed policies on the pruned pair set vs on every pair (Gavel's set), same inputs.

Why: a packed policy here solves over each job's ``top_k`` best partners (about 1 % of
the pairs at 512 jobs); Gavel's LP holds every pair. This measures, on one snapshot per
size, what the pruning costs (objective, allocation, each job's throughput) and what it
saves (solve time), for every ``*_packed`` policy in the registry, both sides in the same
process on the same snapshot (``pair_set="pruned"`` vs ``pair_set="all"``).

Inputs: n jobs drawn as ``benchmarks/policy_solve.py`` draws them (Gavel's catalogue, job
types uniform, scale factors 1/1/2/4/8, 8 users, weights 1 or 2, seeded) on Gavel's
simulation cluster, 36 k80 + 36 p100 + 36 v100: the cluster the packed replays run on.
"All" keeps every pair with a positive co-located throughput on some type; Gavel's LP
also holds the same-scale-factor pairs its catalogue gives 0 steps/s (every multi-GPU
pair), columns that can only stay at zero: their count is recorded, not solved.

Times are whole ``allocate`` calls (pair building, LP, allocation), median of
``--repeats`` fresh policies. Objectives are recomputed from each allocation's per-job
effective throughput (alone and inside pairs), so both sides are scored alike.

    .venv/bin/python -m benchmarks.packing_pairs [--sizes 64,128,256,512] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.model import Allocation, ClusterSnapshot, split_pair  # noqa: E402
from lyra_ray.model.throughput import load_gavel_throughputs  # noqa: E402
from lyra_ray.policies.base import available_policies, get_policy  # noqa: E402
from lyra_ray.policies.gavel.cost import DEFAULT_PRICES, prices  # noqa: E402
from lyra_ray.policies.gavel.finish_time_fairness import ftf_inputs  # noqa: E402
from lyra_ray.policies.gavel.inputs import FloatArray, Problem, build_problem  # noqa: E402
from lyra_ray.policies.gavel.packed import _las_scale, solve_packed_las  # noqa: E402
from lyra_ray.policies.gavel.pairs import candidate_pairs  # noqa: E402
from lyra_ray.policies.gavel.water_filling import hierarchical_weights  # noqa: E402
from tests.gavel_builders import random_snapshot, snapshot  # noqa: E402

SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
CLUSTER = {"k80": 36, "p100": 36, "v100": 36}
TARGET_N, TARGET_S = 512, 0.5
SWEEP_K = (8, 16, 32, 64)
OUT = ROOT / "benchmarks" / "results" / "packing_pairs.json"
COMMAND = ".venv/bin/python -m benchmarks.packing_pairs"


def make_snapshot(n: int, seed: int) -> ClusterSnapshot:
    model = load_gavel_throughputs(SHARED / "gavel" / "simulation_throughputs.json")
    drawn = random_snapshot(n, seed, catalogue=model, job_types=sorted(model.job_types))
    return snapshot(drawn.jobs, CLUSTER, model, now=drawn.now)


def served(snap: ClusterSnapshot, p: Problem, alloc: Allocation) -> tuple[FloatArray, ...]:
    """Per job: steps/s (alone and in pairs), steps/s per dollar, and its time on each
    type alone and paired (n x 2k) — what the objectives and distances are taken from."""
    row = {job.id: i for i, job in enumerate(p.jobs)}
    price = prices(p, DEFAULT_PRICES)
    thr, per_dollar, time_on = np.zeros(p.n), np.zeros(p.n), np.zeros((p.n, 2 * p.k))
    for key, xs in alloc.fractions.items():
        ids = split_pair(key)
        x = np.array([xs.get(g, 0.0) for g in p.gpu_types])
        if len(ids) == 1:
            i = row[ids[0]]
            thr[i] += float(x @ p.T[i])
            per_dollar[i] += float(x @ (p.T[i] / price))
            time_on[i, : p.k] += x
            continue
        a, b = row[ids[0]], row[ids[1]]
        for j, g in enumerate(p.gpu_types):
            pt = snap.throughput_model.pair_throughput(p.jobs[a].spec, p.jobs[b].spec, g)
            if x[j] <= 0 or pt is None:
                continue
            for m, steps in ((a, pt[0]), (b, pt[1])):
                thr[m] += x[j] * steps
                per_dollar[m] += x[j] * steps / price[j]
                time_on[m, p.k + j] += x[j]
    return thr, per_dollar, time_on


def objective(name: str, p: Problem, now: float, thr: FloatArray, per_dollar: FloatArray) -> float:
    """The policy's own objective, from the per-job throughput it gives."""
    active = p.runnable.any(axis=1)
    if name == "max_min_fairness_packed":
        return float((thr * _las_scale(p))[active].min())
    if name == "min_total_duration_packed":  # max-min of throughput / remaining steps
        r = np.array([max(j.remaining_steps, 1e-9) for j in p.jobs])
        return float((thr / r)[active].min())
    if name == "max_min_fairness_water_filling_packed":  # its first (lowest) water level
        per_job = _las_scale(p) * p.weights / hierarchical_weights(p)
        return float((thr * per_job)[active].min())
    if name == "finish_time_fairness_packed":  # largest rho (minimised)
        t, r, b = ftf_inputs(p, now, np.zeros(p.n))
        with np.errstate(divide="ignore"):
            return float(((t + r / np.maximum(thr, 1e-300)) / b)[active].max())
    if name == "max_sum_throughput_normalized_by_cost_packed_SLOs":
        return float(per_dollar.sum())
    raise ValueError(f"no objective for {name}")


MINIMISED = {"finish_time_fairness_packed"}
NOT_LP = {"fifo_packed": "Gavel's greedy packing pass over the queue; no pair set, no LP"}


def timed_allocate(name: str, pair_set: str, snap: ClusterSnapshot, repeats: int) -> Any:
    """(median seconds, allocation) over fresh policies (finish-time fairness keeps state)."""
    times, alloc = [], Allocation()
    for _ in range(repeats):
        pol = get_policy(name, pair_set=pair_set)
        t0 = time.perf_counter()
        alloc = pol.allocate(snap)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, alloc


def compare(name: str, snap: ClusterSnapshot, repeats: int) -> dict[str, Any]:
    p = build_problem(snap)
    side: dict[str, dict[str, Any]] = {}
    got: dict[str, tuple[FloatArray, ...]] = {}
    for ps in ("pruned", "all"):
        med, times, alloc = timed_allocate(name, ps, snap, repeats)
        got[ps] = served(snap, p, alloc)
        thr, per_dollar, _ = got[ps]
        side[ps] = {
            "median_s": med,
            "times_s": times,
            "objective": objective(name, p, snap.now, thr, per_dollar),
            "pairs_used": sum(1 for k in alloc.fractions if len(split_pair(k)) == 2),
        }
    (tp, _, fp), (tf, _, ff) = got["pruned"], got["all"]
    op, of = side["pruned"]["objective"], side["all"]["objective"]
    shortfall = (op - of) / of if name in MINIMISED else (of - op) / of
    active = p.runnable.any(axis=1) & (tf > 0)
    ratio = tp[active] / tf[active]
    l1 = np.abs(fp - ff).sum(axis=1)
    return {
        **{f"{ps}_{k}": v for ps in side for k, v in side[ps].items()},
        "speedup": side["all"]["median_s"] / side["pruned"]["median_s"],
        "pruned_shortfall": shortfall,
        "time_l1_mean": float(l1.mean()),
        "time_l1_max": float(l1.max()),
        "jobs_time_changed": int((l1 > 1e-6).sum()),
        "throughput_ratio_min": float(ratio.min()),
        "throughput_ratio_median": float(np.median(ratio)),
        "throughput_ratio_max": float(ratio.max()),
        "jobs_slower_pruned": int((ratio < 1 - 1e-6).sum()),
        "jobs": p.n,
    }


def pair_counts(snap: ClusterSnapshot) -> dict[str, int]:
    p = build_problem(snap)
    same_sf = int(sum(int(c) * (int(c) - 1) // 2 for c in np.unique(p.sf, return_counts=True)[1]))
    pruned = candidate_pairs(snap, p)
    partners = np.bincount(pruned.idx.ravel(), minlength=p.n)
    return {
        "possible": p.n * (p.n - 1) // 2,
        "gavel_same_scale_factor": same_sf,
        "all_positive": candidate_pairs(snap, p, pair_set="all").size,
        "pruned": pruned.size,
        "pruned_jobs_with_partners": int((partners > 0).sum()),
        "pruned_max_partners": int(partners.max(initial=0)),
    }


def top_k_sweep(snap: ClusterSnapshot, full_level: float) -> list[dict[str, float]]:
    """Packed LAS with more partners per job: how wide the pruned set must be to reach
    the full set's level (``top_k`` is an option of every packed policy)."""
    p = build_problem(snap)
    out = []
    for k in SWEEP_K:
        t0 = time.perf_counter()
        level = solve_packed_las(snap, p, k)[1]
        out.append(
            {
                "top_k": k,
                "pairs": candidate_pairs(snap, p, k).size,
                "seconds": time.perf_counter() - t0,
                "shortfall": (full_level - level) / full_level,
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,128,256,512")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    names = [n for n in available_policies() if "_packed" in n and n not in NOT_LP]
    out: dict[str, Any] = {
        "command": COMMAND,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_at_start": os.getloadavg(),
        "cluster": ":".join(f"{g}={c}" for g, c in CLUSTER.items()),
        "seed": args.seed,
        "repeats": args.repeats,
        "target": {"jobs": TARGET_N, "seconds": TARGET_S},
        "not_compared": NOT_LP,
        "sizes": {},
    }
    for n in (int(x) for x in args.sizes.split(",")):
        snap = make_snapshot(n, args.seed)
        row: dict[str, Any] = {"pairs": pair_counts(snap), "policies": {}}
        for name in names:
            r = compare(name, snap, args.repeats)
            row["policies"][name] = r
            print(
                f"n={n:4d} {name:52s} pruned {r['pruned_median_s']:.3f}s all "
                f"{r['all_median_s']:.3f}s shortfall {r['pruned_shortfall']:+.4f}",
                flush=True,
            )
        if n == TARGET_N:
            full = solve_packed_las(snap, build_problem(snap), pair_set="all")[1]
            row["las_top_k_sweep"] = top_k_sweep(snap, full)
        out["sizes"][str(n)] = row
    out["load_avg_at_end"] = os.getloadavg()
    at = out["sizes"].get(str(TARGET_N), {}).get("policies", {})
    out["all_within_target_at_512"] = {k: v["all_median_s"] <= TARGET_S for k, v in at.items()}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    if Path(args.out) == OUT:
        from benchmarks.docs_tables import table

        table("packing-pairs").write()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
