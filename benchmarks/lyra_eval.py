"""Lyra's evaluation: Baseline / Basic / Lyra / Ideal, per (workload, seed) (docs/lyra.md).

Three suites, one harness (the workloads: ``benchmarks/_lyra_workloads.py``):

* default: every Pollux workload (160 multi-GPU jobs each, Pollux's own work, speeds on
  A100 and T4 from ElasticFlow's tables and Pollux's profiles, ranges from the
  profiles) on 32 A100s beside eight T4 servers serving two ServeGen models' days; seeds
  0, 1, 2 pick the day and the hour. Writes ``benchmarks/results/lyra_eval.json``;
* ``--philly``: the former evaluation, 7 Philly windows x seeds 0, 1 (docs/lyra.md),
  ``benchmarks/results/lyra_eval_philly.json``;
* ``--trace FILE --format F``: anyone's trace (any format ``lyra simulate`` reads;
  ``philly`` with ``--cluster-id`` to take one cluster's rows) on ``--cluster`` /
  ``--inference`` pools, with ``--serving-demand`` in ``lyra simulate``'s grammar
  (``FILE`` of servers, or ``FILE@REQ_PER_S[,...]`` request-rate series).

Scenarios: Baseline (``lyra-baseline``: no loaning, jobs at their requested size), Basic
(``basic``: loaning, naive reclaim, greedy elasticity, as docs/lyra.md defines it), Lyra
(``lyra`` with its defaults), Ideal (Lyra with free restarts). ``--extra`` adds
``unlimited`` (Lyra with every inference server lendable all the time: the ceiling of
loaning). Every run charges each job its restart by the restart model
(``lyra_ray/model/restart_cost.py``), Ideal none.

One invocation merges its runs into ``--out`` (replacing the same keys) and recomputes
the summary; ``--report`` prints the tables from the JSON alone::

    .venv/bin/python benchmarks/lyra_eval.py                 # Pollux suite, ~2 min here
    .venv/bin/python benchmarks/lyra_eval.py --philly        # Philly windows, ~25 min
    .venv/bin/python benchmarks/lyra_eval.py --trace my.csv --format pollux \\
        --cluster a100=4x8 --inference t4=16x4 --serving-demand rates.csv@40
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _lyra_workloads as W
from benchmarks._lyra_report import summarise, tables
from lyra_ray.model.restart_cost import RESTART_S, RestartModel
from lyra_ray.policies.base import Policy, get_policy
from lyra_ray.sim.simulator import SimResult, Simulator

ROOT = W.ROOT
log = logging.getLogger("lyra_eval")
KEYS = (
    "avg_queue_s", "median_queue_s", "p95_queue_s", "avg_jct_s", "median_jct_s", "p95_jct_s",
    "gpu_usage_training", "gpu_usage_overall", "preemption_ratio", "on_loan_utilisation",
    "reclaims", "reclaim_preemptions", "preemptions", "resizes", "completed_jobs", "makespan_s",
    "wall_s",
)  # fmt: skip
LYRA: dict[str, Any] = {}
"""Lyra as evaluated: the policy's own defaults (docs/lyra.md, "Why Lyra queued more")."""
SCENARIOS: dict[str, tuple[str, dict[str, Any], bool, bool]] = {
    # name: (policy, policy kwargs, free restarts, every inference server lendable)
    "baseline": ("lyra-baseline", {}, False, False),
    "basic": ("basic", {}, False, False),
    "lyra": ("lyra", LYRA, False, False),
    "ideal": ("lyra", {**LYRA, "resize_cost_s": 0.0}, True, False),
    "unlimited": ("lyra", LYRA, False, True),
}


def while_queued(res: SimResult) -> float | None:
    """On-loan utilisation counted only while some job waits: lent GPUs that idle while
    nothing waits cost training nothing, and they dilute the whole-run figure."""
    s = res.recorder.samples
    end = max(res.core.now, s[-1].t) if s else 0.0
    busy = lent = 0.0
    for a, b in zip(s, [*s[1:], None], strict=True):
        dt_s = (b.t if b is not None else end) - a.t
        if a.queued > 0 and dt_s > 0:
            busy += a.busy_lent * dt_s
            lent += a.lent * dt_s
    return busy / lent if lent > 0 else None


def lent_hours(res: SimResult) -> tuple[float, float]:
    """(GPU-hours on loan, GPU-hours of training on lent GPUs) over the run."""
    s = res.recorder.samples
    end = max(res.core.now, s[-1].t) if s else 0.0
    lent = busy = 0.0
    for a, b in zip(s, [*s[1:], None], strict=True):
        dt_s = (b.t if b is not None else end) - a.t
        lent += a.lent * dt_s
        busy += a.busy_lent * dt_s
    return lent / 3600.0, busy / 3600.0


def simulate(
    policy: Policy, case: W.Case, ideal: bool = False, unlimited: bool = False
) -> SimResult:
    """One case under ``policy``: each restart priced by the restart model (free if
    ``ideal``), serving's day as the case has it (none at all if ``unlimited``)."""
    demand = [(t, 0) for t, _ in case.demand[:1]] if unlimited else case.demand
    sim = Simulator(
        case.nodes,
        policy,
        case.model,
        resize_overhead_s=0.0,
        serving_demand=demand,
        restart_model=None if ideal else RestartModel(),
    )
    return sim.run(case.specs)


def run(name: str, case: W.Case, scenarios: dict[str, Any] | None = None) -> dict[str, Any]:
    policy, kwargs, ideal, unlimited = (scenarios or SCENARIOS)[name]
    t0 = time.perf_counter()
    res = simulate(get_policy(policy, **kwargs), case, ideal, unlimited)
    if res.summary["completed_jobs"] < len(case.specs):
        log.warning("%s %s: %d of %d jobs never completed", case.key, name,
                    len(case.specs) - res.summary["completed_jobs"], len(case.specs))  # fmt: skip
    out: dict[str, Any] = {k: res.summary.get(k) for k in KEYS}
    out["policy"], out["policy_args"] = policy, kwargs
    out["restarts"] = "free" if ideal else "restart model"
    # Mean JCT minus mean queuing: how long jobs ran (slower on loaned GPUs, plus restarts).
    out["mean_run_s"] = float(res.summary["avg_jct_s"]) - float(res.summary["avg_queue_s"])
    out["on_loan_utilisation_while_queued"] = while_queued(res)
    out["gpu_hours_lent"], out["gpu_hours_lent_busy"] = lent_hours(res)
    held = [sum(j.time_received_s.values()) for j in res.core.jobs.values()]
    jct = [r["jct_s"] for r in res.jobs if r["jct_s"] is not None]
    out["avg_wait_total_s"] = (sum(jct) - sum(held)) / len(jct) if jct else None
    log.info("%s %s: queue %.0f s, JCT %.0f s, preempted %.1f%% (%.1f s)", case.key, name,
             out["avg_queue_s"], out["avg_jct_s"], 100 * out["preemption_ratio"],
             time.perf_counter() - t0)  # fmt: skip
    return out


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def cases(args: argparse.Namespace) -> list[W.Case]:
    seeds = _ints(args.seeds)
    if args.trace is not None:
        if args.format == "philly":
            return [
                W.philly_case(Path(args.trace), start, seed, args, ())
                for start in _ints(args.windows or "0")
                for seed in seeds
            ]
        return [W.trace_case(seed, args) for seed in seeds]
    if args.philly:
        philly = W.shared_data() / "pollux" / "philly.csv"
        windows = _ints(args.windows) if args.windows else list(W.PHILLY_WINDOWS)
        return [W.philly_case(philly, w, s, args, W.TUNED_PHILLY) for w in windows for s in seeds]
    workloads = _ints(args.workloads) if args.workloads else list(W.POLLUX_WORKLOADS)
    return [W.pollux_case(w, s, args) for w in workloads for s in seeds]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--philly", action="store_true", help="the Philly windows suite")
    ap.add_argument("--trace", help="any trace lyra simulate reads (with --format)")
    ap.add_argument("--format", choices=("gavel", "philly", "yaml", "pollux"))
    ap.add_argument("--cluster-id", default=None, help="philly: this cluster's rows only")
    ap.add_argument("--cluster", help="training pool, TYPE=NODESxGPUS (lyra simulate's grammar)")
    ap.add_argument("--inference", help="inference pool, TYPE=NODESxGPUS")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--serving-demand", help="FILE (time_s,servers) or FILE@REQ_PER_S[,...]")
    ap.add_argument("--profiles", help="pollux: the profiles directory")
    ap.add_argument("--throughputs", help="pollux: ElasticFlow's tables directory")
    ap.add_argument("--workloads", help="Pollux workload numbers (default 1-8)")
    ap.add_argument("--windows", help="Philly: first job of each window")
    ap.add_argument("--seeds", default=None)
    ap.add_argument("--jobs", type=int, default=1000, help="Philly: jobs per window")
    ap.add_argument("--elastic-share", type=float, default=0.5, help="Philly: elastic jobs")
    ap.add_argument("--max-duration-h", type=float, default=24.0, help="Philly: clip")
    ap.add_argument("--t4-speed", type=float, default=0.4, help="Philly: T4 / V100 per worker")
    ap.add_argument("--elastic-rule", choices=("profile", "doubling"), default="profile")
    ap.add_argument("--fraction", type=float, default=None, help="profile rule's fraction")
    ap.add_argument("--scenarios", default="baseline,basic,lyra,ideal")
    ap.add_argument("--extra", default="", help="side runs: unlimited")
    ap.add_argument("--report", action="store_true", help="print the tables from --out only")
    ap.add_argument("--out", type=Path, default=None)
    return ap


def write(report: dict[str, Any], args: argparse.Namespace) -> None:
    """Store the runs so far, with the settings and the summary recomputed."""
    skip = ("out", "report", "scenarios", "extra")
    report["settings"] = {k: v for k, v in vars(args).items() if k not in skip and v is not None}
    # the restart model's default price the runs were made with: a re-measured resize
    # (benchmarks/resize_phases.py) changes it, and these results then want a rerun
    report["settings"]["restart_s"] = RESTART_S
    report["command"] = "benchmarks/lyra_eval.py " + " ".join(sys.argv[1:])
    report["goal"] = {"jct_x": 1.5, "preemption_ratio_max": 0.05, "vs_basic": "<= (1 % tie)"}
    report["summary"] = summarise(report["runs"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out)


def main() -> int:
    args = parser().parse_args()
    from lyra_ray.model.elastic_range import DEFAULT_FRACTION

    if args.fraction is None:
        args.fraction = DEFAULT_FRACTION
    if args.seeds is None:
        args.seeds = "0,1" if (args.philly or args.format == "philly") else "0,1,2"
    if args.philly and args.cluster_id is None:
        args.cluster_id = "6214e9"
    if args.out is None:
        name = "lyra_eval_philly.json" if args.philly else "lyra_eval.json"
        if args.trace is not None:
            name = f"lyra_eval_{Path(args.trace).stem}.json"
        args.out = ROOT / "benchmarks" / "results" / name
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    report: dict[str, Any] = {"runs": {}}
    if args.out.is_file():
        old = json.loads(args.out.read_text())
        if "runs" in old:
            report = old
    if not args.report:
        if args.trace is None and not W.shared_data().is_dir():
            print(f"skipped: {W.shared_data()} not found (set LYRA_SHARED_DATA)")
            return 0
        names = [s for s in (*args.scenarios.split(","), *args.extra.split(",")) if s in SCENARIOS]
        todo = cases(args)
        for i, case in enumerate(todo, 1):
            runs = report["runs"].setdefault(case.key, {})
            runs.update({"held_out": case.held_out, "workload": case.meta})
            runs.setdefault("scenarios", {}).update({s: run(s, case) for s in names})
            # Written after every run, so a long campaign stopped part-way keeps what it did.
            write(report, args)
            log.info("%d of %d runs done (%s)", i, len(todo), case.key)
        print(f"wrote {args.out}")
    print(tables(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
