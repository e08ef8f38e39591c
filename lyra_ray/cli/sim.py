"""``lyra simulate``: replay a trace through the real scheduler core on a virtual clock."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from lyra_ray.model.pools import GRAMMAR
from lyra_ray.sim.workload import FORMATS, SimSettings


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate a trace with a policy", description=__doc__)
    p.add_argument("--trace", required=True, help="trace file")
    p.add_argument("--format", choices=FORMATS, help="trace format (default: by extension)")
    p.add_argument(
        "--cluster",
        default="v100=8,p100=16,k80=24",
        help=f"the training pool: {GRAMMAR}, comma-separated (default v100=8,p100=16,k80=24)",
    )
    p.add_argument(
        "--inference",
        help=f"the inference pool: {GRAMMAR} (Lyra lends what serving leaves idle)",
    )
    p.add_argument(
        "--serving-demand",
        help="inference demand: a time_s,servers CSV; request-rate series "
        "FILE@CAPACITY[,FILE@CAPACITY...] (ts_s,rate_rps CSVs, each at one server's "
        "capacity in req/s; several are added); or 'diurnal' (seeded, mean 40%% of the "
        "pool; the default when --inference is given)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=1,
        help="GPUs per server of a TYPE=COUNT pool item (default 1)",
    )
    p.add_argument("--policy", default="fifo_nonpreemptive", help="policy name or module:Class")
    p.add_argument(
        "--policy-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one of the policy's own settings, repeatable (e.g. --policy lyra --policy-arg "
        "finish_first=rigid --policy-arg move_gain_s=null; docs/cli.md)",
    )
    p.add_argument("--round-seconds", type=float, default=360.0, help="round length (s)")
    p.add_argument(
        "--backfill",
        action="store_true",
        help="hand GPUs idle mid-round to waiting jobs (as live; default: Gavel's rounds)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for synthetic choices")
    p.add_argument(
        "--resize-overhead",
        type=float,
        default=None,
        help="seconds each restart (preemption-resume or resize) costs every job; default: "
        "each job's price by the measured restart model (lyra_ray/model/restart_cost.py: "
        "its checkpoint_mb and startup_s), 0 for Gavel traces (as Gavel's simulator)",
    )
    p.add_argument(
        "--network",
        help="model the fabric: servers_per_rack=8,nic_gbps=25,oversubscription=4 (a job "
        "spread over servers then pays its ring all-reduce; default: communication is free)",
    )
    p.add_argument(
        "--placer", default="consolidate", help="consolidate (default) or ring (needs --network)"
    )
    p.add_argument("--jct-window", help="FIRST:LAST job indices to average over")
    p.add_argument(
        "--throughputs",
        help="Gavel-format throughput JSON (gavel traces), or for a pollux workload a "
        "directory of ElasticFlow tables (throughputs_<TYPE>/<model>.csv)",
    )
    p.add_argument(
        "--profiles",
        help="pollux workloads: the directory of the applications' profiles "
        "(default: profiles/ beside the workload's folder)",
    )
    p.add_argument(
        "--elastic-rule",
        choices=("profile", "doubling"),
        default="profile",
        help="pollux workloads: each job's worker range from its profile (default), or the "
        "former max(1, g//2)..2g around its num_replicas g (docs/lyra.md)",
    )
    p.add_argument("--max-jobs", type=int, help="use only the first N jobs of the trace")
    p.add_argument(
        "--teams",
        help="a YAML file of teams (quota, weight, borrow_limit, lend_limit, preemptible) "
        "and the users or job names in each; the policy then respects their quotas "
        "(docs/teams.md)",
    )
    p.add_argument("--json", dest="json_out", help="write the JSON report here")
    p.add_argument("--plots", help="write PNG plots into this directory")
    p.add_argument("--quiet", action="store_true", help="no table, no progress bar")
    p.set_defaults(func=run_simulate)


def _default_gavel_throughputs() -> Path | None:
    env = os.environ.get("LYRA_SHARED_DATA")
    roots = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]
    roots += [here.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for r in roots:
        p = r / "gavel" / "simulation_throughputs.json"
        if p.exists():
            return p
    return None


def settings(args: argparse.Namespace) -> SimSettings:
    """The flags as the simulator's typed settings."""
    return SimSettings(
        trace=args.trace,
        format=args.format,
        cluster=args.cluster,
        inference=args.inference,
        serving_demand=args.serving_demand,
        gpus_per_node=args.gpus_per_node,
        policy=args.policy,
        policy_args=tuple(args.policy_arg),
        round_seconds=args.round_seconds,
        backfill=args.backfill,
        seed=args.seed,
        resize_overhead=args.resize_overhead,
        network=args.network,
        placer=args.placer,
        jct_window=args.jct_window,
        throughputs=args.throughputs,
        max_jobs=args.max_jobs,
        teams=args.teams,
        profiles=args.profiles,
        elastic_rule=args.elastic_rule,
        gavel_table=str(p) if (p := _default_gavel_throughputs()) else None,
    )


def run_simulate(args: argparse.Namespace) -> int:
    from lyra_ray import native

    if getattr(args, "own_process", False):
        native.activate()  # before the core's first import: see lyra_ray/native.py
    from lyra_ray.sim.report import render_table, to_json, write_plots
    from lyra_ray.sim.workload import assemble

    work = assemble(settings(args))
    work.meta["compiled_core"] = native.active()
    specs = work.specs
    if args.quiet:  # no bar, no table: Rich is not even imported (start-up counts)
        result = work.simulator.run(specs, work.window)
    else:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        ) as bar:
            task = bar.add_task(f"simulating {len(specs)} jobs", total=len(specs))
            result = work.simulator.run(
                specs, work.window, progress=lambda d, _t: bar.update(task, completed=d)
            )
        render_table(result.summary, f"{args.policy} on {Path(args.trace).name}", Console())
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(to_json(result, work.meta))
    if args.plots:
        for p in write_plots(result, args.plots):
            if not args.quiet:
                print(f"wrote {p}")
    return 0
