"""``lyra simulate``: replay a trace through the real scheduler core on a virtual clock."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from lyra_ray.model import JobSpec, Node, ThroughputModel
from lyra_ray.model.errors import InputError

FORMATS = ("gavel", "philly", "yaml")


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate a trace with a policy", description=__doc__)
    p.add_argument("--trace", required=True, help="trace file")
    p.add_argument("--format", choices=FORMATS, help="trace format (default: by extension)")
    p.add_argument(
        "--cluster",
        default="v100=8,p100=16,k80=24",
        help="training GPUs per type, e.g. v100=8,p100=16,k80=24",
    )
    p.add_argument(
        "--inference",
        help="inference-pool GPUs per type, e.g. t4=16 (Lyra lends what serving leaves idle)",
    )
    p.add_argument(
        "--serving-demand",
        help="inference demand in servers: a time_s,servers CSV, or 'diurnal' (seeded, "
        "mean 40%% of the pool; the default when --inference is given)",
    )
    p.add_argument("--gpus-per-node", type=int, default=1, help="GPUs per server (default 1)")
    p.add_argument("--policy", default="fifo_nonpreemptive", help="policy name or module:Class")
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
        help="seconds each restart (preemption-resume or resize) costs a job; default: the "
        "measured restart model (lyra_ray/model/restart_cost.py), 0 for Gavel traces (as "
        "Gavel's simulator)",
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
    p.add_argument("--throughputs", help="Gavel-format throughput JSON (gavel traces)")
    p.add_argument("--max-jobs", type=int, help="use only the first N jobs of the trace")
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


def parse_window(raw: str | None) -> tuple[int, int] | None:
    if raw is None:
        return None
    try:
        a, b = (int(x) for x in raw.split(":"))
    except ValueError:
        raise InputError(f"--jct-window: expected FIRST:LAST job indices, got {raw!r}") from None
    if a < 0 or b < a:
        raise InputError(f"--jct-window: need 0 <= FIRST <= LAST, got {raw!r}")
    return a, b


def load_workload(
    args: argparse.Namespace, nodes: list[Node], inference: Sequence[Node] = ()
) -> tuple[list[JobSpec], ThroughputModel]:
    """Read the trace and the matching throughput model; check every job can ever run.

    A job must fit in the training pool alone: loaned inference servers come and go.
    """
    from lyra_ray.model import scaling
    from lyra_ray.model.throughput import catalogue_throughputs, load_gavel_throughputs
    from lyra_ray.sim import traces

    fmt = args.format or {".trace": "gavel", ".csv": "philly", ".yaml": "yaml", ".yml": "yaml"}.get(
        Path(args.trace).suffix
    )
    if fmt is None:
        raise InputError(f"--format: cannot tell the format of {args.trace!r}; give --format")
    gpu_types = {n.gpu_type for n in [*nodes, *inference]}
    model: ThroughputModel
    if fmt == "gavel" or args.throughputs:
        path = args.throughputs or _default_gavel_throughputs()
        if path is None:
            raise InputError("--throughputs: a Gavel trace needs Gavel's throughput JSON")
        model = load_gavel_throughputs(path)
        if fmt != "gavel":  # a profiled table for a job list: the catalogue's types stay
            model = catalogue_throughputs().overlay(model)
    else:
        model = catalogue_throughputs()
    job_types = model.job_types  # type: ignore[attr-defined]
    if fmt == "gavel":
        specs = traces.read_gavel_trace(args.trace, known_job_types=job_types)
    elif fmt == "philly":
        specs = traces.read_philly_csv(
            args.trace,
            seed=args.seed,
            max_jobs=args.max_jobs,
            max_gpus=max(_by_type(nodes).values()),
        )
    else:
        specs = traces.read_yaml_jobs(
            args.trace,
            known_gpu_types=gpu_types,
            known_job_types=job_types,
            known_curves=scaling.known_curves(),
        )
    if args.max_jobs is not None:
        specs = specs[: args.max_jobs]
    _check_feasible(specs, nodes, model, args.trace)
    return specs, model


def _by_type(nodes: list[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in nodes:
        out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out


def _check_feasible(
    specs: list[JobSpec], nodes: list[Node], model: ThroughputModel, source: str
) -> None:
    cap = _by_type(nodes)
    for s in specs:
        ok = [
            g
            for g, c in cap.items()
            if c >= s.min_workers and model.throughput(s, g, s.min_workers) > 0
        ]
        if not ok:
            raise InputError(
                f"{source}: job {s.name!r}: field 'min_workers': needs {s.min_workers} GPUs of "
                f"one type it can run on; the cluster has {cap}"
            )


def _inference_nodes(args: argparse.Namespace) -> list[Node]:
    from lyra_ray.model.spec import parse_cluster

    if args.inference is None:
        if args.serving_demand is not None:
            raise InputError("--serving-demand: needs --inference (the pool it describes)")
        return []
    try:
        return parse_cluster(args.inference, args.gpus_per_node, "inference", "inf-")
    except InputError as e:
        raise InputError(f"--inference: {e}") from None


def _serving_demand(
    args: argparse.Namespace, inference: list[Node], specs: list[JobSpec]
) -> list[tuple[float, int]]:
    """Demand in servers over time; the diurnal default spans the trace plus three days."""
    from lyra_ray.sim.serving import demand_series, diurnal, read_demand_csv

    if not inference:
        return []
    source = args.serving_demand or "diurnal"
    if source == "diurnal":
        horizon = max((s.arrival_s for s in specs), default=0.0) + 3 * 86_400.0
        points = diurnal(len(inference), horizon, seed=args.seed)
    else:
        points = read_demand_csv(source)
        too_many = [p for p in points if p.servers > len(inference)]
        if too_many:
            raise InputError(
                f"{source}: field 'servers': {too_many[0].servers} at t={too_many[0].time_s} "
                f"exceeds the {len(inference)} inference servers of --inference"
            )
    return demand_series(points)


def run_simulate(args: argparse.Namespace) -> int:
    from lyra_ray.model.spec import parse_cluster
    from lyra_ray.placement.ring import make_placer
    from lyra_ray.policies.base import PolicyError, get_policy
    from lyra_ray.sim.report import render_table, to_json, write_plots
    from lyra_ray.sim.simulator import Simulator

    nodes = parse_cluster(args.cluster, args.gpus_per_node)
    inference = _inference_nodes(args)
    window = parse_window(args.jct_window)
    # (math.isfinite: nan passed `<= 0` and simulated nonsense; found by fuzzing)
    if not math.isfinite(args.round_seconds) or args.round_seconds <= 0:
        raise InputError(f"--round-seconds: must be a finite number > 0, got {args.round_seconds}")
    if args.resize_overhead is None:
        from lyra_ray.model.restart_cost import RESTART_S

        fmt = args.format or ("gavel" if str(args.trace).endswith(".trace") else "")
        args.resize_overhead = 0.0 if fmt == "gavel" else RESTART_S
    if not math.isfinite(args.resize_overhead) or args.resize_overhead < 0:
        raise InputError(
            f"--resize-overhead: must be a finite number >= 0, got {args.resize_overhead}"
        )
    if args.max_jobs is not None and args.max_jobs < 0:
        raise InputError(f"--max-jobs: must be >= 0, got {args.max_jobs}")
    specs, model = load_workload(args, nodes, inference)
    demand = _serving_demand(args, inference, specs)
    try:
        policy = get_policy(args.policy)
    except PolicyError as e:
        raise InputError(f"--policy: {e}") from None
    topology = network = None
    if args.network is not None:
        from lyra_ray.network.config import parse_network, topology_for
        from lyra_ray.network.ring import RingCommModel

        topology = topology_for(nodes + inference, parse_network(args.network))
        network = RingCommModel(topology)
    try:
        placer = make_placer(args.placer, topology)
    except ValueError as e:
        raise InputError(f"--{e}") from None
    sim = Simulator(
        nodes + inference,
        policy,
        model,
        round_s=args.round_seconds,
        resize_overhead_s=args.resize_overhead,
        serving_demand=demand,
        placer=placer,
        network=network,
        backfill=args.backfill,
    )
    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=args.quiet,
    ) as bar:
        task = bar.add_task(f"simulating {len(specs)} jobs", total=len(specs))
        result = sim.run(specs, window, progress=lambda d, _t: bar.update(task, completed=d))
    meta = {
        "trace": str(args.trace),
        "policy": args.policy,
        "cluster": args.cluster,
        "gpus_per_node": args.gpus_per_node,
        "round_s": args.round_seconds,
        "seed": args.seed,
        "resize_overhead_s": args.resize_overhead,
        "jct_window": args.jct_window,
        "inference": args.inference,
        "serving_demand": args.serving_demand,
        "network": args.network,
        "placer": args.placer,
    }
    if not args.quiet:
        render_table(result.summary, f"{args.policy} on {Path(args.trace).name}", Console())
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(to_json(result, meta))
    if args.plots:
        for p in write_plots(result, args.plots):
            if not args.quiet:
                print(f"wrote {p}")
    return 0
