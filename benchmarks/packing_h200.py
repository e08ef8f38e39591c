"""Packing (space sharing) on measured H200 pairs: Gavel's packed vs unpacked policies.

Runs two unpacked/packed policy pairs side by side in one process through the project's
simulator (``lyra simulate``'s code path: core, round mechanism, SimRuntime), on a cluster
of H200s only, with the throughput table measured on a real H200
(``lyra_ray/model/data/h200_throughputs.json``: 8 job types alone and all 36 pairs).
Writes ``benchmarks/results/packing_h200.json``; docs/gavel.md renders it
(``<!-- packing-h200 -->``, via ``benchmarks/docs_tables.py``).

Trace: Gavel's own job stream, ``generated_continuous_single_seed0_lam1200_3000jobs.trace``
(single-GPU jobs, Poisson arrivals, λ = 1200 s mean inter-arrival), its first ``--jobs``
jobs. Each Gavel job type maps to the measured H200 job of its model family; every batch
size variant maps to the one measured shape (ResNet-18 (batch size 64) -> resnet18, ...).
Gavel's generator drew each job's run time (10^U(1.5, 4) minutes) and converted it to
steps at its V100 rate; here the steps are converted back to that run time and then to
H200 steps at the H200 rate of its family, so every job runs alone on an H200 for exactly
as long as Gavel drew (the H200 stands in as the reference GPU, and the offered load in
GPU-hours is the trace's own).

Load levels: the trace's arrivals as they are, and the same jobs with every arrival time
scaled by ``--heavy-scale`` (compressed, a heavier load). JCT is averaged over the job id
window ``--window`` (Gavel's steady-state measure); makespan is the simulated subset's
(first arrival to last completion).

    .venv/bin/python benchmarks/packing_h200.py     # ~80 s of CPU (one core)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray import model as m  # noqa: E402
from lyra_ray.model import JobSpec  # noqa: E402
from lyra_ray.model.spec import parse_cluster  # noqa: E402
from lyra_ray.model.throughput import CatalogueThroughputs, load_gavel_throughputs  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.sim.simulator import Simulator  # noqa: E402
from lyra_ray.sim.traces import read_gavel_trace  # noqa: E402

SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data")) / "gavel"
TRACE_NAME = "generated_continuous_single_seed0_lam1200_3000jobs.trace"
H200_TABLE = ROOT / "lyra_ray" / "model" / "data" / "h200_throughputs.json"
REFERENCE_GPU = "v100"
"""The GPU type Gavel's generator used to turn a drawn run time into steps."""
FAMILY = {
    "ResNet-18": "resnet18",
    "ResNet-50": "resnet50",
    "Transformer": "transformer",
    "LM": "lm",
    "Recommendation": "recommendation",
    "A3C": "a3c",
    "CycleGAN": "cyclegan",
}
"""Gavel's model family (its job type without ``(batch size N)``) -> the measured job."""
PAIRS = [  # (label, unpacked, packed)
    ("LAS (max-min fairness)", "max_min_fairness", "max_min_fairness_packed"),
    ("FIFO", "fifo_perf", "fifo_packed"),
]


def family(gavel_job_type: str) -> str:
    return FAMILY[gavel_job_type.split(" (batch size")[0]]


def h200_jobs(
    specs: list[JobSpec], gavel: CatalogueThroughputs, h200: CatalogueThroughputs
) -> list[JobSpec]:
    """Gavel's jobs as H200 jobs that run alone for as long as Gavel drew (see above)."""
    out = []
    for s in specs:
        assert s.job_type is not None and s.min_workers == 1
        fam = family(s.job_type)
        run_time_s = s.total_steps / gavel.alone[(s.job_type, 1)][REFERENCE_GPU]
        steps = run_time_s * h200.alone[(fam, 1)]["h200"]
        out.append(replace(s, job_type=fam, total_steps=steps))
    return out


def offered_load(specs: list[JobSpec], h200: CatalogueThroughputs) -> float:
    """Busy H200s the subset asks for on average: its run time alone over its arrival span."""
    work = sum(s.total_steps / h200.alone[(s.job_type or "", 1)]["h200"] for s in specs)
    span = specs[-1].arrival_s - specs[0].arrival_s
    return work / span


class PairCounter:
    """Counts the pairs a run launched (distinct, and launches of a pair) by watching the
    actions the simulated runtime applies; a kept pair emits nothing, so each count is a
    pair (re)formed."""

    def __init__(self, sim: Simulator) -> None:
        self.distinct: set[frozenset[str]] = set()
        self.launches = 0
        self.families: Counter[str] = Counter()
        """Distinct pairs by the two jobs' types."""
        apply, specs = sim.runtime.apply, sim.runtime.specs

        def counting(actions: Any) -> None:
            for a in actions:
                if isinstance(a, m.Launch | m.Resize) and a.assignment.partner is not None:
                    self.launches += 1
                    key = frozenset((a.job_id, a.assignment.partner))
                    if key not in self.distinct:
                        self.distinct.add(key)
                        types = sorted(str(specs[j].job_type) for j in key)
                        self.families["+".join(types)] += 1
            apply(actions)

        sim.runtime.apply = counting  # type: ignore[method-assign]


def paired_share(sim_result: Any) -> float:
    """Share of busy GPU time that ran a pair (single-GPU jobs: a pair is one job more
    running than GPUs busy)."""
    s = sim_result.recorder.samples
    end = max(sim_result.summary["makespan_s"] or 0.0, s[-1].t)
    busy = paired = 0.0
    for a, b in zip(s, [*s[1:], None], strict=True):
        dt = (b.t if b is not None else end) - a.t
        busy += a.busy_training * dt
        paired += (a.running - a.busy_training) * dt
    return paired / busy if busy > 0 else 0.0


def run_one(
    name: str, specs: list[JobSpec], model: CatalogueThroughputs, gpus: int, window: tuple[int, int]
) -> dict[str, Any]:
    sim = Simulator(parse_cluster(f"h200={gpus}"), get_policy(name), model, round_s=360.0)
    counter = PairCounter(sim)
    marks = iter(range(100, len(specs) + 100, 100))
    mark = next(marks)

    def progress(done: int, total: int) -> None:
        nonlocal mark
        while done >= mark:
            print(f"    {name}: {mark}/{total} jobs done", flush=True)
            mark = next(marks, total + 1)

    res = sim.run(specs, window, progress=progress)
    sm = res.summary
    return {
        "avg_jct_s": sm["avg_jct_s"],
        "median_jct_s": sm["median_jct_s"],
        "p95_jct_s": sm["p95_jct_s"],
        "makespan_s": sm["makespan_s"],
        "completed_jobs": sm["completed_jobs"],
        "window_jobs": sm["window_jobs"],
        "gpu_usage": sm["gpu_usage_training"],
        "preemptions": sm["preemptions"],
        "pairs_distinct": len(counter.distinct),
        "pair_launches": counter.launches,
        "pair_types": dict(counter.families.most_common()),
        "paired_gpu_time_share": paired_share(res),
        "wall_s": res.wall_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3000, help="first N jobs of the trace")
    ap.add_argument("--window", default="1000:1499", help="FIRST:LAST job ids averaged")
    ap.add_argument("--gpus", type=int, default=48, help="H200s in the cluster")
    ap.add_argument(
        "--heavy-scale",
        type=float,
        default=0.75,
        help="arrival times times this for the heavy load (0.75: λ = 900 s)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "packing_h200.json"))
    args = ap.parse_args()
    trace = SHARED / "traces" / TRACE_NAME
    if not trace.exists():
        sys.exit(f"packing_h200: {trace} not found (needs ../shared/data); nothing run")
    first, last = (int(x) for x in args.window.split(":"))
    gavel = load_gavel_throughputs(SHARED / "simulation_throughputs.json")
    h200 = load_gavel_throughputs(H200_TABLE)
    specs0 = read_gavel_trace(trace, known_job_types=gavel.job_types)[: args.jobs]
    base = h200_jobs(specs0, gavel, h200)
    if not 0 <= first <= last < len(base):
        sys.exit(f"packing_h200: --window {args.window} outside the {len(base)} jobs")
    alone = [s.total_steps / h200.alone[(s.job_type or "", 1)]["h200"] for s in base]
    alone_window = sum(alone[first : last + 1]) / (last - first + 1)
    mean_gap = (base[-1].arrival_s - base[0].arrival_s) / (len(base) - 1)
    print(
        f"{len(base)} jobs of {TRACE_NAME}, window {first}-{last} (run time alone "
        f"{alone_window / 3600:.2f} h on average), h200={args.gpus}",
        flush=True,
    )
    t_start, c_start = time.perf_counter(), time.process_time()
    out_levels = []
    for label, scale in (("gavel", 1.0), ("heavy", args.heavy_scale)):
        specs = [replace(s, arrival_s=s.arrival_s * scale) for s in base]
        load = offered_load(specs, h200)
        print(
            f"load {label}: mean inter-arrival {mean_gap * scale:.0f} s, offered "
            f"{load:.1f} busy H200s of {args.gpus} ({load / args.gpus:.2f})",
            flush=True,
        )
        rows = []
        for pair_label, unpacked, packed in PAIRS:
            row: dict[str, Any] = {"family": pair_label, "unpacked": unpacked, "packed": packed}
            for key, name in (("unpacked_result", unpacked), ("packed_result", packed)):
                r = run_one(name, specs, h200, args.gpus, (first, last))
                r["slowdown"] = r["avg_jct_s"] / alone_window
                row[key] = r
                print(
                    f"  {name}: avg JCT {r['avg_jct_s'] / 3600:.2f} h "
                    f"({r['slowdown']:.2f}x alone), makespan {r['makespan_s'] / 3600:.1f} h, "
                    f"{r['pairs_distinct']} pairs, {r['paired_gpu_time_share']:.0%} of busy "
                    f"GPU time paired, {r['wall_s']:.1f} s",
                    flush=True,
                )
            u, p = row["unpacked_result"], row["packed_result"]
            row["jct_gain"] = u["avg_jct_s"] / p["avg_jct_s"]
            row["makespan_gain"] = u["makespan_s"] / p["makespan_s"]
            print(
                f"  {pair_label}: packing gain JCT {row['jct_gain']:.3f}x, "
                f"makespan {row['makespan_gain']:.3f}x",
                flush=True,
            )
            rows.append(row)
        out_levels.append(
            {
                "level": label,
                "arrival_scale": scale,
                "mean_interarrival_s": mean_gap * scale,
                "offered_busy_gpus": load,
                "offered_load": load / args.gpus,
                "pairs": rows,
            }
        )
    wall, cpu = time.perf_counter() - t_start, time.process_time() - c_start
    result = {
        "command": " ".join([".venv/bin/python benchmarks/packing_h200.py", *sys.argv[1:]]),
        "trace": TRACE_NAME,
        "jobs": len(base),
        "jct_window": [first, last],
        "window_avg_run_time_alone_s": alone_window,
        "cluster": f"h200={args.gpus}",
        "round_s": 360.0,
        "throughputs": str(H200_TABLE.relative_to(ROOT)),
        "job_type_mapping": "Gavel model family -> measured H200 job; every batch size "
        "variant maps to the one measured shape: "
        + ", ".join(f"{k} -> {v}" for k, v in FAMILY.items()),
        "steps_conversion": "total_steps / Gavel's v100 steps/s of the exact Gavel job type "
        "(= the run time Gavel's generator drew, 10^U(1.5,4) min) x the H200 steps/s of its "
        "family: each job runs alone on an H200 for as long as Gavel drew, so the offered "
        "GPU-hours are the trace's",
        "load_levels": "gavel: the trace's own arrivals (Poisson, mean 1200 s); heavy: every "
        f"arrival time x {args.heavy_scale}. Offered load = the jobs' run time alone over "
        "their arrival span, per GPU, before packing",
        "cluster_choice": f"{args.gpus} H200s (the GPU count of Gavel's physical cluster): "
        "the trace's own rate offers about one busy GPU per GPU, where single-GPU jobs "
        "start to wait (moderate); the heavy rate is more than the cluster holds "
        "unpacked, so it queues",
        "levels": out_levels,
        "wall_s": wall,
        "cpu_s": cpu,
        "load_avg_1m_after": os.getloadavg()[0],
        "python": sys.version.split()[0],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} ({wall:.0f} s wall, {cpu:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
