"""A simulation's workload, assembled from plain typed settings: ``lyra simulate``'s
trace, cluster, inference pool, serving demand, throughput table, policy, placer and
network, checked and ready to run.

WHY here and not in the CLI: the CLI only parses flags and prints; a benchmark that
builds a run by hand gets the same checks (every job admitted against the training pool
by :func:`lyra_ray.model.admission.check_admissible`, as the live boundary admits it)
and the same report metadata. Errors name the ``lyra simulate`` flag each setting
comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lyra_ray.model import JobSpec, Node, ThroughputModel
from lyra_ray.model.admission import check_admissible
from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import check_gpus_per_node, parse_pool

if TYPE_CHECKING:  # the CLI imports the settings before it knows it will simulate
    from lyra_ray.model.teams import TeamSet
    from lyra_ray.scheduling.interfaces import Placer
    from lyra_ray.sim.simulator import Simulator

FORMATS = ("gavel", "philly", "yaml", "pollux")
_SUFFIXES = {".trace": "gavel", ".csv": "philly", ".yaml": "yaml", ".yml": "yaml"}
MIN_ROUND_S, MAX_ROUND_S = 1.0, 1e7
"""A round's length: Gavel's is 360 s, the live scheduler's a few seconds. Each round a
job runs costs the simulator one core step, so a sub-second round multiplies the work of
every run; past ~116 days a round is longer than any job it would share GPUs between."""
MAX_RESTART_S = 86_400.0
"""Seconds one restart may cost (the measured one: lyra_ray/model/restart_cost.py)."""


@dataclass(frozen=True)
class SimSettings:
    """What ``lyra simulate`` was asked to run; each field is the flag of that name."""

    trace: str
    format: str | None = None
    cluster: str = "v100=8,p100=16,k80=24"
    inference: str | None = None
    serving_demand: str | None = None
    gpus_per_node: int = 1
    policy: str = "fifo_nonpreemptive"
    policy_args: tuple[str, ...] = ()
    """The policy's own settings, ``KEY=VALUE`` each (:mod:`lyra_ray.policies.args`)."""
    round_seconds: float = 360.0
    backfill: bool = False
    seed: int = 0
    resize_overhead: float | None = None
    """None: the measured restart cost, 0 for Gavel traces (as Gavel's simulator)."""
    network: str | None = None
    placer: str = "consolidate"
    jct_window: str | None = None
    throughputs: str | None = None
    max_jobs: int | None = None
    teams: str | None = None
    """A teams YAML file (:func:`lyra_ray.model.teams.load_teams`): the policy then runs
    inside the teams wrapper (:mod:`lyra_ray.policies.teams`); ``None``: no teams."""
    gavel_table: str | None = None
    """Gavel's throughput JSON to use for a Gavel trace given no ``throughputs`` (where
    the caller found the shared data; this module reads no path it was not given)."""
    profiles: str | None = None
    """A Pollux workload's ``profiles/`` directory (default: beside its folder)."""
    elastic_rule: str = "profile"
    """A Pollux job's elastic range: ``profile`` (docs/lyra.md) or ``doubling``."""


@dataclass
class Workload:
    """A checked simulation, ready to :meth:`Simulator.run` on ``specs``."""

    simulator: Simulator
    specs: list[JobSpec]
    window: tuple[int, int] | None
    meta: dict[str, Any]
    """The report's ``meta``: the settings as given, the restart cost as used."""


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


def trace_format(s: SimSettings) -> str:
    fmt = s.format or _SUFFIXES.get(Path(s.trace).suffix)
    if fmt is None:
        raise InputError(f"--format: cannot tell the format of {s.trace!r}; give --format")
    return fmt


def load_jobs(
    s: SimSettings, nodes: list[Node], inference: list[Node] | None = None
) -> tuple[list[JobSpec], ThroughputModel]:
    """The trace's jobs and the matching throughput model; every job admitted.

    A job must fit in the training pool alone: loaned inference servers come and go.
    """
    from lyra_ray.model import scaling
    from lyra_ray.model.throughput import (
        CatalogueThroughputs,
        catalogue_throughputs,
        load_gavel_throughputs,
    )
    from lyra_ray.sim import traces

    fmt = trace_format(s)
    gpu_types = {n.gpu_type for n in [*nodes, *(inference or [])]}
    model: ThroughputModel
    table: CatalogueThroughputs | None = None
    tables_dir = s.throughputs is not None and Path(s.throughputs).is_dir()
    if tables_dir and fmt != "pollux":
        raise InputError(
            "--throughputs: a directory of ElasticFlow tables speeds up a --format pollux "
            "workload; other formats take Gavel's throughput JSON"
        )
    if fmt == "pollux":
        specs, model = _pollux_jobs(s)
    elif fmt == "gavel" or s.throughputs:
        path = s.throughputs or s.gavel_table
        if path is None:
            raise InputError("--throughputs: a Gavel trace needs Gavel's throughput JSON")
        table = load_gavel_throughputs(path)
        if fmt != "gavel":  # a profiled table for a job list: the catalogue's types stay
            table = catalogue_throughputs().overlay(table)
        model = table
    else:
        model = table = catalogue_throughputs()
    capacity = _by_type(nodes)
    if fmt == "pollux":
        pass
    elif fmt == "gavel":
        specs = traces.read_gavel_trace(s.trace, known_job_types=table.job_types if table else ())
    elif fmt == "philly":
        specs = traces.read_philly_csv(
            s.trace, seed=s.seed, max_jobs=s.max_jobs, max_gpus=max(capacity.values())
        )
    else:
        specs = traces.read_yaml_jobs(
            s.trace,
            known_gpu_types=gpu_types,
            known_job_types=table.job_types if table else (),
            known_curves=scaling.known_curves(),
        )
    if s.max_jobs is not None:
        specs = specs[: s.max_jobs]
    for spec in specs:
        check_admissible(spec, capacity, model, f"{s.trace}: job {spec.name!r}")
    return specs, model


def _pollux_jobs(s: SimSettings) -> tuple[list[JobSpec], ThroughputModel]:
    """A Pollux/Sia workload: profiles beside it (or ``--profiles``), ElasticFlow's
    tables if ``--throughputs`` names their directory (:mod:`lyra_ray.sim.profiled_jobs`)."""
    from lyra_ray.sim.elasticflow import read_tables
    from lyra_ray.sim.pollux import find_profiles
    from lyra_ray.sim.profiled_jobs import profiled_jobs

    profiles = s.profiles or find_profiles(s.trace)
    if profiles is None:
        raise InputError(
            f"--profiles: no profiles/ directory beside {s.trace}; give the folder of the "
            "applications' profiles"
        )
    if not Path(profiles).is_dir():
        raise InputError(f"--profiles: {profiles} is not a directory")
    if s.throughputs is not None and not Path(s.throughputs).is_dir():
        raise InputError(
            f"--throughputs: {s.throughputs}: a pollux workload takes a directory of "
            "ElasticFlow tables (throughputs_<TYPE>/<model>.csv)"
        )
    tables = read_tables(s.throughputs) if s.throughputs else None
    work = profiled_jobs(s.trace, profiles, tables, rule=s.elastic_rule)
    return work.specs, work.model


def _by_type(nodes: list[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in nodes:
        out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out


def _inference_nodes(s: SimSettings) -> list[Node]:
    if s.inference is None:
        if s.serving_demand is not None:
            raise InputError("--serving-demand: needs --inference (the pool it describes)")
        return []
    return parse_pool(s.inference, "--inference").nodes(s.gpus_per_node, "inference", "inf-")


def _serving_demand(
    s: SimSettings, inference: list[Node], specs: list[JobSpec]
) -> list[tuple[float, int]]:
    """Demand in servers over time; the diurnal default spans the trace plus three days."""
    if not inference:
        return []
    from lyra_ray.sim.serving import demand_series, diurnal, parse_demand_spec

    source = s.serving_demand or "diurnal"
    if source == "diurnal":
        horizon = max((j.arrival_s for j in specs), default=0.0) + 3 * 86_400.0
        points = diurnal(len(inference), horizon, seed=s.seed)
    else:
        points = parse_demand_spec(source)
        too_many = [p for p in points if p.servers > len(inference)]
        if too_many and "@" in source:
            raise InputError(
                f"--serving-demand: at t={too_many[0].time_s:g} s the request rates need "
                f"{too_many[0].servers} servers at the stated capacities, more than the "
                f"{len(inference)} of --inference"
            )
        if too_many:
            raise InputError(
                f"{source}: field 'servers': {too_many[0].servers} at t={too_many[0].time_s} "
                f"exceeds the {len(inference)} inference servers of --inference"
            )
    return demand_series(points)


def _number(flag: str, v: float, lo: float, hi: float) -> None:
    # (math.isfinite: nan passed `<= 0` and simulated nonsense; found by fuzzing)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise InputError(f"{flag}: must be a finite number in [{lo:g}, {hi:g}], got {v}")


def assemble(s: SimSettings) -> Workload:
    """Check every setting, read the trace, admit its jobs, build the simulator."""
    from lyra_ray.model.restart_cost import RESTART_S, RestartModel
    from lyra_ray.placement.placer import ConsolidatingPlacer
    from lyra_ray.policies.base import PolicyError, get_policy
    from lyra_ray.sim.simulator import Simulator

    per_node = check_gpus_per_node(s.gpus_per_node)
    nodes = parse_pool(s.cluster, "--cluster").nodes(per_node)
    inference = _inference_nodes(s)
    window = parse_window(s.jct_window)
    _number("--round-seconds", s.round_seconds, MIN_ROUND_S, MAX_ROUND_S)
    overhead = s.resize_overhead
    restarts = None
    if overhead is None:
        fmt = s.format or ("gavel" if str(s.trace).endswith(".trace") else "")
        overhead = 0.0 if fmt == "gavel" else RESTART_S
        if fmt != "gavel":  # each job its own price (its checkpoint, its start-up)
            restarts = RestartModel()
    _number("--resize-overhead", overhead, 0.0, MAX_RESTART_S)
    if s.max_jobs is not None and s.max_jobs < 0:
        raise InputError(f"--max-jobs: must be >= 0, got {s.max_jobs}")
    specs, model = load_jobs(s, nodes, inference)
    demand = _serving_demand(s, inference, specs)
    kwargs: dict[str, Any] = {}
    if s.policy_args:  # (its YAML and pydantic only when asked: start-up counts)
        from lyra_ray.policies.args import parse_policy_args

        try:
            kwargs = parse_policy_args(s.policy, s.policy_args)
        except PolicyError as e:
            raise InputError(f"--policy-arg: {e}") from None
    try:
        policy = get_policy(s.policy, **kwargs)
    except PolicyError as e:
        raise InputError(f"--policy: {e}") from None
    except (TypeError, ValueError) as e:  # a setting the policy's own checks refuse
        raise InputError(f"--policy-arg: {e}") from None
    if s.teams is not None:
        from lyra_ray.model.teams import load_teams
        from lyra_ray.policies.teams import with_teams

        try:
            team_set = load_teams(s.teams, _by_type(nodes))
            _check_effective(s.teams, team_set, _by_type(nodes), specs, model)
        except InputError as e:
            raise InputError(f"--teams: {e}") from None
        policy = with_teams(policy, team_set)
    topology = network = None
    if s.network is not None:
        from lyra_ray.network.config import parse_network, topology_for
        from lyra_ray.network.ring import RingCommModel

        topology = topology_for(nodes + inference, parse_network(s.network))
        network = RingCommModel(topology)
    # The default placer without importing the ring placer and the network model it
    # brings (start-up counts: ``benchmarks/sim_speed.py`` times whole runs).
    placer: Placer = ConsolidatingPlacer()
    if s.placer != "consolidate":
        from lyra_ray.placement.ring import make_placer

        try:
            placer = make_placer(s.placer, topology)
        except ValueError as e:
            raise InputError(f"--{e}") from None
    sim = Simulator(
        nodes + inference,
        policy,
        model,
        round_s=s.round_seconds,
        resize_overhead_s=overhead,
        serving_demand=demand,
        placer=placer,
        network=network,
        backfill=s.backfill,
        restart_model=restarts,
    )
    meta = {
        "trace": str(s.trace),
        "policy": s.policy,
        "policy_args": kwargs,
        "cluster": s.cluster,
        "gpus_per_node": s.gpus_per_node,
        "round_s": s.round_seconds,
        "seed": s.seed,
        "resize_overhead_s": "per job (restart model)" if restarts is not None else overhead,
        "jct_window": s.jct_window,
        "inference": s.inference,
        "serving_demand": s.serving_demand,
        "network": s.network,
        "placer": s.placer,
        "teams": s.teams,
        "profiles": s.profiles,
        "elastic_rule": s.elastic_rule,
    }
    return Workload(sim, specs, window, meta)


def _check_effective(
    path: str,
    teams: TeamSet,
    cluster: dict[str, int],
    specs: list[JobSpec],
    model: ThroughputModel,
) -> None:
    """Effective guarantees against the cluster's capacity in reference units, with the
    types' factors from the trace's jobs (the capacity rule of
    :mod:`lyra_ray.model.team_accounting`, over every job the run will see)."""
    if teams.unit != "effective":
        return
    from lyra_ray.model.team_accounting import effective_capacity, reference_factors
    from lyra_ray.model.teams import oversubscription

    ref = teams.reference_for(cluster)
    eff = effective_capacity(cluster, reference_factors(specs, cluster, model, ref))
    why = oversubscription(teams.teams, cluster, eff)
    if why is not None:
        raise InputError(f"{path}: field 'teams': {why}")
