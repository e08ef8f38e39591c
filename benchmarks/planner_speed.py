"""Planner speed: the pruned search against the exhaustive one, side by side.

For each case (model, GPU type, GPU count, global batch) both searches run in this
process, alternating, ``--repeats`` times; the best wall time of each is kept and the
ratio reported. Both must return the same ranked plans (the pruning is exact), which the
script checks. It also times what a scheduling decision pays: turning a job's ``model:``
into its throughput table (every GPU type of a cluster x every size an elastic job takes),
cold (first parse) and warm (memoised, as on a re-parse or a restart).

Run: ``.venv/bin/python benchmarks/planner_speed.py`` -> benchmarks/results/planner_speed.json
The host is shared: the file records CPU seconds and the load average around each case.
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

from lyra_ray.model.spec import parse_job_spec  # noqa: E402
from lyra_ray.parallelism import PlanOptions, gpu_spec, plan, zoo_model  # noqa: E402
from lyra_ray.parallelism import jobs as model_jobs  # noqa: E402

CASES = (  # model, GPU type, GPUs, global batch
    ("gpt-1.3b", "v100", 8, 512),
    ("gpt-13b", "a100", 32, 512),
    ("gpt-39b", "a100", 64, 1536),
    ("gpt-175b", "a100", 96, 1536),
    ("gpt-145b", "a100", 1536, 2304),
    ("gpt-1t", "a100", 3072, 3072),
)


BEST_KEYS = ("t", "p", "d", "microbatch", "schedule", "iteration_s")


def timed(fn: Any) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def one_case(name: str, gpu: str, n: int, batch: int, repeats: int) -> dict[str, Any]:
    model, spec = zoo_model(name), gpu_spec(gpu)
    best = {"pruned": (float("inf"), 0.0), "exhaustive": (float("inf"), 0.0)}
    answers: dict[str, list[dict[str, Any]]] = {}
    load = os.getloadavg()[0]
    for i in range(repeats):
        order = ("pruned", "exhaustive") if i % 2 == 0 else ("exhaustive", "pruned")
        for how in order:
            opts = PlanOptions(top_k=5, prune=how == "pruned")
            got, wall, cpu = timed(lambda o=opts: plan(model, spec, n, batch, o))
            answers[how] = [p.to_dict() for p in got]
            if wall < best[how][0]:
                best[how] = (wall, cpu)
    same = answers["pruned"] == answers["exhaustive"]
    if not same:
        raise SystemExit(f"{name} on {n} {gpu}: pruned and exhaustive rankings differ")
    top = answers["pruned"][0] if answers["pruned"] else None
    return {
        "model": name,
        "gpu": gpu,
        "gpus": n,
        "batch": batch,
        "pruned_s": best["pruned"][0],
        "pruned_cpu_s": best["pruned"][1],
        "exhaustive_s": best["exhaustive"][0],
        "exhaustive_cpu_s": best["exhaustive"][1],
        "speedup": best["exhaustive"][0] / best["pruned"][0],
        "same_ranking": same,
        "best": None if top is None else {k: top[k] for k in BEST_KEYS},
        "load_1min": [load, os.getloadavg()[0]],
    }


def job_tables() -> list[dict[str, Any]]:
    """What parsing one model job costs: a planner search per GPU type and size."""
    types = ["a100", "h100", "v100", "p100", "t4", "k80"]
    out = []
    for name, lo, hi, batch in (("gpt-1.3b", 1, 16, 256), ("gpt-13b", 8, 32, 512)):
        raw = {
            "name": f"{name}-job",
            "total_steps": 100,
            "min_workers": lo,
            "max_workers": hi,
            "model": {"name": name, "batch": batch},
        }
        model_jobs._MEMO.clear()
        spec, cold, cold_cpu = timed(lambda r=raw: parse_job_spec(r, "job", known_gpu_types=types))
        _, warm, _ = timed(lambda r=raw: parse_job_spec(r, "job", known_gpu_types=types))
        searches = len(types) * (hi - lo + 1)
        out.append(
            {
                "model": name,
                "sizes": [lo, hi],
                "gpu_types": types,
                "searches": searches,
                "cold_s": cold,
                "cold_cpu_s": cold_cpu,
                "per_search_ms": 1e3 * cold / searches,
                "warm_s": warm,
                "types_it_fits": sorted(spec.throughput_by_size or {}),
            }
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each search per case")
    ap.add_argument("--quick", action="store_true", help="only the cases under 100 GPUs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "planner_speed.json"))
    args = ap.parse_args()
    cases = [c for c in CASES if not args.quick or c[2] < 100]
    rows = []
    for c in cases:
        rows.append(one_case(*c, repeats=args.repeats))
        r = rows[-1]
        print(
            f"{r['model']:9s} {r['gpus']:5d} {r['gpu']}: pruned {r['pruned_s'] * 1e3:7.1f} ms, "
            f"exhaustive {r['exhaustive_s'] * 1e3:7.1f} ms, {r['speedup']:.2f}x, same ranking"
        )
    tables = job_tables()
    for t in tables:
        print(
            f"job {t['model']} sizes {t['sizes']} on {len(t['gpu_types'])} types: "
            f"{t['cold_s']:.2f} s cold ({t['per_search_ms']:.1f} ms/search), "
            f"{t['warm_s'] * 1e3:.2f} ms warm"
        )
    result = {
        "what": "planner search time: pruned (branch and bound over shapes) vs exhaustive, "
        "same process, best of --repeats alternating runs; rankings checked equal",
        "cpus": os.cpu_count(),
        "cases": rows,
        "job_tables": tables,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
