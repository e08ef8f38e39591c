"""The workloads of Lyra's evaluation (``benchmarks/lyra_eval.py``, docs/lyra.md).

A *case* is one (workload, seed): the jobs, the throughput model they run by, the
cluster and the serving demand. Three kinds:

* **Pollux** (the evaluation): a Pollux workload (``../shared/data/pollux/workloads``,
  160 multi-GPU jobs over ~8 h) read by the simulator's reader
  (:mod:`lyra_ray.sim.profiled_jobs`): Pollux's own total work, speeds on A100 and T4
  from ElasticFlow's tables and Pollux's profiles, each job's range from its profile.
  The training pool is A100 servers; the inference pool T4 servers, whose demand is
  ServeGen's request rates of two language models (:data:`SERVING`), turned into busy
  servers at a stated capacity per server. The seed picks the day of ServeGen's 14 and
  the hour the workload starts at (:func:`serving_offset`).
* **Philly** (kept beside it): windows of 1,000 real Philly submissions, half of them
  elastic by the former ``max(1, g // 2)``..``2 g`` rule with a measured curve drawn by
  the seed, on V100 training servers and T4 inference servers that follow a seeded
  diurnal curve, a T4 at 0.4x a V100 (an assumption): the evaluation as it was.
* **Any trace** (``--trace FILE --format F``): whatever ``lyra simulate`` reads, on the
  pools and the serving demand given in ``lyra simulate``'s grammar.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lyra_ray.model import JobSpec, Node, ThroughputModel, scaling
from lyra_ray.model.pools import parse_pool
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.sim.serving import (
    DemandPoint,
    RatePoint,
    add_series,
    demand_series,
    diurnal,
    mean_utilisation,
    parse_demand_spec,
    read_rate_csv,
    servers_for,
)

ROOT = Path(__file__).resolve().parents[1]
DAY_S = 86_400.0
POLLUX_WORKLOADS = (1, 2, 3, 4, 5, 6, 7, 8)
TUNED_POLLUX = (1, 2, 6)
"""The developers' Pollux workloads, whose runs chose the policy's defaults (docs/lyra.md,
"How the defaults were chosen"; workload 6 is Pollux's own testbed workload). The
branch's record named 1 and 6 when the loaning defaults were set and 2 and 6 once moves
were added; all three count as seen, none as held out."""
SERVING: tuple[tuple[str, float], ...] = (("language-m-large", 160.0), ("language-m-mid", 1000.0))
"""ServeGen models on the inference pool, each with one T4 server's capacity in req/s,
stated so that each model's 14-day peak (583 and 3,445 req/s) takes four of the eight
servers: a pool sized for its peak, which it serves at ~40 % on average (the paper's
premise)."""
POLLUX_CLUSTER = {"train": "a100=4x8", "infer": "t4=8x4"}
"""32 A100s (the workloads offer 21-63 A100s of load at their requested sizes over their
8 hours of arrivals; their largest jobs need 32) and eight servers of four T4s (Pollux's
own node), lent when serving leaves them idle."""
PHILLY_WINDOWS = (5000, 12000, 13000, 17000, 19000, 20000, 35000)
TUNED_PHILLY = (5000, 20000)
CURVES = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


def shared_data() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


@dataclass
class Case:
    key: str
    specs: list[JobSpec]
    model: ThroughputModel
    nodes: list[Node]
    demand: list[tuple[float, int]]
    held_out: bool
    meta: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------- serving


def serving_offset(seed: int) -> float:
    """Seconds into ServeGen's series at which a seed's run starts: day ``seed`` (mod
    14), at hour ``8 * seed`` (mod 24): seeds 0, 1, 2 start at midnight, 8:00 and
    16:00 of three different days."""
    return (seed % 14) * DAY_S + ((8 * seed) % 24) * 3600.0


def rate_demand(
    models: Sequence[tuple[str, float]], root: Path, offset_s: float, horizon_s: float
) -> list[DemandPoint]:
    """The models' busy servers from ``offset_s`` into their series on, for
    ``horizon_s``, wrapping around the end of a series (ServeGen's language models
    cover 14 days; a series repeats after its last window)."""
    series = []
    for name, cap in models:
        pts = read_rate_csv(root / f"{name}.csv")
        step = pts[-1].time_s - pts[-2].time_s if len(pts) > 1 else 600.0
        span = pts[-1].time_s + step
        start = offset_s % span
        now = max((p for p in pts if p.time_s <= start), key=lambda p: p.time_s)
        out = [RatePoint(0.0, now.rate_rps)]
        k = 0
        while k * span - start <= horizon_s:
            for p in pts:
                t = p.time_s + k * span - start
                if 0 < t <= horizon_s:
                    out.append(RatePoint(t, p.rate_rps))
            k += 1
        series.append(servers_for(out, cap))
    return add_series(series)


# ---------------------------------------------------------------------------- Pollux


def pollux_case(workload: int, seed: int, args: argparse.Namespace) -> Case:
    from lyra_ray.sim.elasticflow import read_tables
    from lyra_ray.sim.profiled_jobs import profiled_jobs

    data = shared_data()
    trace = data / "pollux" / "workloads" / f"workload-{workload}.csv"
    tables = read_tables(data / "elasticflow")
    work = profiled_jobs(
        trace, data / "pollux" / "profiles", tables, rule=args.elastic_rule, fraction=args.fraction
    )
    nodes = pools(
        args.cluster or POLLUX_CLUSTER["train"], args.inference or POLLUX_CLUSTER["infer"]
    )
    specs, capped = cap_requests(work.specs, nodes)
    infer = sum(1 for n in nodes if n.pool == "inference")
    horizon = max(s.arrival_s for s in work.specs) + 3 * DAY_S
    points = rate_demand(SERVING, data / "servegen", serving_offset(seed), horizon)
    if max(p.servers for p in points) > infer:
        raise SystemExit(
            f"serving needs {max(p.servers for p in points)} servers, pool has {infer}"
        )
    return Case(
        key=f"workload-{workload}/{seed}",
        specs=specs,
        model=work.model,
        nodes=nodes,
        demand=demand_series(points),
        held_out=workload not in TUNED_POLLUX,
        meta={
            "source": f"pollux workload-{workload}.csv, ElasticFlow tables, "
            f"elastic rule {args.elastic_rule} ({args.fraction})",
            "serving": [f"{m}@{c:g}" for m, c in SERVING],
            "serving_offset_h": serving_offset(seed) / 3600.0,
            "serving_mean_utilisation": mean_utilisation(points, infer),
            "jobs": len(specs),
            "elastic_jobs": sum(1 for s in specs if s.elastic),
            "requests_capped": capped,
        },
    )


def cap_requests(specs: list[JobSpec], nodes: list[Node]) -> tuple[list[JobSpec], int]:
    """Requests above the training pool's largest type come down to it, and how many.

    A Pollux workload asks for up to 48 replicas (on Pollux's 64 GPUs); Baseline runs a
    job at its request, and a request no type of the training pool holds would never
    start, leaving the job out of Baseline's means. It runs at the most the pool holds
    instead (within the job's range, which the profile rule keeps at or above it)."""
    by_type: dict[str, int] = {}
    for n in nodes:
        if n.pool == "training":
            by_type[n.gpu_type] = by_type.get(n.gpu_type, 0) + n.num_gpus
    most = max(by_type.values(), default=0)
    out, capped = [], 0
    for s in specs:
        want = s.config.get("requested_workers")
        if isinstance(want, int) and want > most >= s.min_workers:
            out.append(dataclasses.replace(s, config={**s.config, "requested_workers": most}))
            capped += 1
        else:
            out.append(s)
    return out, capped


def pools(train: str, infer: str | None, per_node: int = 8) -> list[Node]:
    nodes = parse_pool(train, "--cluster").nodes(per_node, "training", "")
    if infer:
        nodes += parse_pool(infer, "--inference").nodes(per_node, "inference", "inf-")
    return nodes


# ---------------------------------------------------------------------------- Philly


def philly_window(
    path: Path, cluster: str | None, start: int, n: int
) -> list[tuple[float, float, int]]:
    """``(arrival_s from the window's first job, duration_s, gpus)`` of ``n`` real jobs of
    one Philly cluster (every cluster's with ``cluster=None``)."""
    with path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if cluster is None or r.get("cluster") == cluster]
    rows = [r for r in rows if float(r["duration"]) > 0 and int(float(r["num_gpus"])) >= 1]
    rows.sort(key=lambda r: r["timestamp"])
    win = rows[start : start + n]
    if not win:
        raise SystemExit(f"{path}: no jobs at {start} (cluster {cluster})")
    t0 = dt.datetime.fromisoformat(win[0]["timestamp"]).timestamp()
    return [
        (
            dt.datetime.fromisoformat(r["timestamp"]).timestamp() - t0,
            float(r["duration"]),
            int(float(r["num_gpus"])),
        )
        for r in win
    ]


def philly_jobs(
    raw: list[tuple[float, float, int]], args: argparse.Namespace, seed: int
) -> list[JobSpec]:
    rnd = random.Random(seed)
    cap_s = args.max_duration_h * 3600.0
    jobs: list[JobSpec] = []
    for i, (arrival, duration, g) in enumerate(raw):
        d = max(1.0, min(duration, cap_s))
        tput = {"v100": 1.0, "t4": args.t4_speed}
        if rnd.random() < args.elastic_share:
            curve = rnd.choice(CURVES)
            steps = d * scaling.speedup(curve, g)
            jobs.append(JobSpec(
                name=f"p{i}", total_steps=steps, min_workers=max(1, g // 2), max_workers=2 * g,
                throughput=tput, scaling=curve, arrival_s=arrival,
                config={"requested_workers": g},
            ))  # fmt: skip
        else:
            jobs.append(JobSpec(
                name=f"p{i}", total_steps=d * g, min_workers=g, max_workers=g,
                throughput=tput, arrival_s=arrival,
            ))  # fmt: skip
    return jobs


def philly_case(
    path: Path, start: int, seed: int, args: argparse.Namespace, tuned: Sequence[int]
) -> Case:
    raw = philly_window(path, args.cluster_id, start, args.jobs)
    nodes = pools(args.cluster or "v100=12x8", args.inference or "t4=16x8")
    infer = sum(1 for n in nodes if n.pool == "inference")
    horizon = raw[-1][0] + 3 * DAY_S
    if args.serving_demand:
        points = parse_demand_spec(args.serving_demand)
    else:
        points = diurnal(infer, horizon, seed=seed)
    load = sum(min(d, args.max_duration_h * 3600.0) * g for _, d, g in raw) / max(raw[-1][0], 1.0)
    return Case(
        key=f"{start}/{seed}",
        specs=philly_jobs(raw, args, seed),
        model=SpecThroughputs(),
        nodes=nodes,
        demand=demand_series(points),
        held_out=start not in tuned,
        meta={
            "source": f"{path.name} {args.cluster_id}, jobs {start}..{start + len(raw) - 1}",
            "span_h": raw[-1][0] / 3600.0,
            "offered_load_v100": load,
            "gpus_1": sum(1 for _, _, g in raw if g == 1),
            "serving_mean_utilisation": mean_utilisation(points, infer),
        },
    )


# ---------------------------------------------------------------------------- any trace


def trace_case(seed: int, args: argparse.Namespace) -> Case:
    """``--trace FILE --format F`` (gavel, yaml, pollux) through ``lyra simulate``'s own
    reader and admission."""
    from lyra_ray.sim.serving import diurnal as _diurnal
    from lyra_ray.sim.workload import SimSettings, load_jobs

    if args.cluster is None:
        raise SystemExit("--trace needs --cluster (and --inference to lend)")
    nodes = pools(args.cluster, args.inference, args.gpus_per_node)
    train = [n for n in nodes if n.pool == "training"]
    infer = [n for n in nodes if n.pool == "inference"]
    settings = SimSettings(
        trace=str(args.trace), format=args.format, seed=seed, profiles=args.profiles,
        throughputs=args.throughputs, elastic_rule=args.elastic_rule,
        gavel_table=str(shared_data() / "gavel" / "simulation_throughputs.json"),
    )  # fmt: skip
    specs, model = load_jobs(settings, train, infer)
    specs, _ = cap_requests(specs, nodes)
    horizon = max((s.arrival_s for s in specs), default=0.0) + 3 * DAY_S
    points = (
        parse_demand_spec(args.serving_demand)
        if args.serving_demand
        else _diurnal(len(infer), horizon, seed=seed)
    )
    return Case(
        key=f"{Path(args.trace).stem}/{seed}",
        specs=specs,
        model=model,
        nodes=nodes,
        demand=demand_series(points),
        held_out=True,
        meta={"source": str(args.trace), "serving": args.serving_demand or "diurnal"},
    )
