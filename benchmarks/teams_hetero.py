"""Teams on a heterogeneous cluster (issue #42): quotas inside the policy vs admit-then-pin.

Workload: a window of Gavel's generated trace (``gavel/traces/
generated_continuous_multiple_seed0_lam1800_2000jobs.trace``: Poisson arrivals, scale
factors 1 to 8, Gavel's measured throughputs and pair throughputs), its jobs dealt to
three teams unevenly (half, 30 % and 20 % of the jobs). Cluster: ``--cluster`` (V100,
P100 and K80 servers of one GPU); the teams are each guaranteed about a third of every
type, each with a different leaning (one type more, another less), and may borrow what
the others leave idle.

Scenarios, same jobs, each policy of ``--policies``:

* ``no_quotas``: the policy alone (the guarantees are only measured against);
* ``pin``: admit-then-pin, the enforcement before issue #42 (``enforce: pin``): each job
  is admitted onto one GPU type, chosen greedily, and pinned there;
* ``inside``: the quotas as rows of the policy's own allocation (``enforce: inside``).

Per scenario: mean JCT, makespan, jobs finished; per team: mean JCT, GPU-hours it held
by type, and its *guarantee share when asked*: the time integral of ``min(used, asked)``
over that of ``asked``, where asked is what its active jobs' minimums claim of its
guarantee (a job on one type, running jobs first: the claims the quota rows are built
from, :mod:`lyra_ray.policies.teams.bounds`), and used the GPUs it holds. The rendered
table is docs/teams.md's (``benchmarks/_teams_hetero_table.py``;
``tests/unit/test_docs_tables.py`` keeps them equal).

    .venv/bin/python benchmarks/teams_hetero.py     # -> benchmarks/results/teams_hetero.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lyra_ray.model import JobSpec, Node
from lyra_ray.model.pools import parse_pool
from lyra_ray.model.teams import TeamSet, parse_teams
from lyra_ray.model.throughput import load_gavel_throughputs
from lyra_ray.policies.base import Policy, get_policy
from lyra_ray.policies.teams import with_teams
from lyra_ray.policies.teams.bounds import claim
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle
from lyra_ray.sim.simulator import Simulator
from lyra_ray.sim.traces import read_gavel_trace

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "teams_hetero.json"
TRACE = "generated_continuous_multiple_seed0_lam1800_2000jobs.trace"
TEAMS = ("a", "b", "c")
DEAL = "aaaaabbbcc"
"""Job ``i`` goes to team ``DEAL[i % 10]``: half the jobs to a, 30 % to b, 20 % to c
(teams' demand is skewed, as in the Philly VCs of ``teams_eval.py``), every team
guaranteed about the same."""
SCENARIOS = ("no_quotas", "pin", "inside")
LEANING = {"a": ("v100", "k80"), "b": ("p100", "v100"), "c": ("k80", "p100")}
"""Each team's guarantee: a third of every type, one GPU more of the first type named
and one fewer of the second (per 12 GPUs of a type)."""


def shared_data() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


def window(path: Path, first: int, count: int, known: set[str]) -> list[JobSpec]:
    """Jobs ``first`` .. ``first + count`` of the trace, arrivals from 0, dealt to teams."""
    specs = read_gavel_trace(path, known_job_types=known)[first : first + count]
    t0 = specs[0].arrival_s
    return [
        dataclasses.replace(s, arrival_s=s.arrival_s - t0, user=DEAL[i % len(DEAL)])
        for i, s in enumerate(specs)
    ]


def guarantees(cluster: dict[str, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {t: {} for t in TEAMS}
    for g, n in cluster.items():
        base, step = n // len(TEAMS), max(1, n // 12)
        for t in TEAMS:
            more, less = LEANING[t]
            out[t][g] = base + (step if g == more else -step if g == less else 0)
    return out


def team_set(cluster: dict[str, int], enforce: str) -> TeamSet:
    g = guarantees(cluster)
    raw = {
        "teams": {t: {"quota": ",".join(f"{k}={v}" for k, v in g[t].items())} for t in TEAMS},
        "users": {t: t for t in TEAMS},
        "enforce": enforce,
    }
    return parse_teams(raw, "teams_hetero", cluster)


class TeamMeter:
    """The loop's observer: each team's GPUs held by type and its asked GPUs, integrated."""

    def __init__(self, guarantee: dict[str, float], teams: TeamSet) -> None:
        self.g, self.teams = guarantee, teams
        self.last: float | None = None
        self.state: dict[str, tuple[float, dict[str, float]]] = {}
        self.asked = dict.fromkeys(guarantee, 0.0)
        self.got = dict.fromkeys(guarantee, 0.0)
        self.held: dict[str, dict[str, float]] = {t: {} for t in guarantee}

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        now = cycle.now
        if self.last is not None and now > self.last:
            dt = now - self.last
            for t, (a, by) in self.state.items():
                used = sum(by.values())
                self.asked[t] += a * dt
                self.got[t] += min(used, a) * dt
                for g, n in by.items():
                    self.held[t][g] = self.held[t].get(g, 0.0) + n * dt
        self.last = now
        claims = claim(core.snapshot(), self.teams).claimed
        asked = {t: sum(claims.get(t, {}).values()) for t in self.g}
        by: dict[str, dict[str, float]] = {t: {} for t in self.g}
        for j in core.active():
            t = j.spec.user
            if t in by and j.current is not None:
                for g, n in j.current.parts:
                    by[t][g] = by[t].get(g, 0.0) + n
        self.state = {t: (asked[t], by[t]) for t in self.g}


def run(policy_name: str, scenario: str, jobs: list[JobSpec], args: Any) -> dict[str, Any]:
    cluster = {g: n for g, n in parse_pool(args.cluster, "--cluster").gpus().items()}
    nodes = [Node(f"{g}-{i:03d}", g, 1) for g, n in sorted(cluster.items()) for i in range(n)]
    model = load_gavel_throughputs(shared_data() / "gavel" / "simulation_throughputs.json")
    policy: Policy = get_policy(policy_name)
    if scenario != "no_quotas":
        policy = with_teams(policy, team_set(cluster, scenario))
    g = guarantees(cluster)
    meter = TeamMeter({t: float(sum(g[t].values())) for t in TEAMS}, team_set(cluster, "inside"))
    sim = Simulator(nodes, policy, model, observers=[meter])
    t0 = time.perf_counter()
    res = sim.run(jobs)
    wall = time.perf_counter() - t0
    teams: dict[str, Any] = {}
    for t in TEAMS:
        recs = [r for r, s in zip(res.jobs, jobs, strict=True) if s.user == t]
        jct = [r["jct_s"] for r in recs if r["jct_s"] is not None]
        teams[t] = {
            "jobs": len(recs),
            "finished": len(jct),
            "mean_jct_h": sum(jct) / len(jct) / 3600 if jct else None,
            "gpu_h": {k: v / 3600 for k, v in sorted(meter.held[t].items())},
            "guarantee_share": meter.got[t] / meter.asked[t] if meter.asked[t] else None,
            "asked_gpu_h": meter.asked[t] / 3600,
        }
    s = res.summary
    return {
        "mean_jct_h": s["avg_jct_s"] / 3600,
        "makespan_h": s["makespan_s"] / 3600,
        "completed": s["completed_jobs"],
        "utilisation": s["gpu_usage_training"],
        "teams": teams,
        "wall_s": round(wall, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--cluster", default="v100=8,p100=8,k80=8")
    ap.add_argument("--first", type=int, default=300, help="first job of the window")
    ap.add_argument("--jobs", type=int, default=240)
    ap.add_argument("--policies", default="max_min_fairness_perf,max_min_fairness_packed,lyra")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    trace = shared_data() / "gavel" / "traces" / TRACE
    if not trace.is_file():
        print(f"skipped: {trace} not found (set LYRA_SHARED_DATA)")
        return 0
    model = load_gavel_throughputs(shared_data() / "gavel" / "simulation_throughputs.json")
    jobs = window(trace, args.first, args.jobs, set(model.job_types))
    cluster = {g: n for g, n in parse_pool(args.cluster, "--cluster").gpus().items()}
    out: dict[str, Any] = {
        "workload": {
            "source": f"gavel/traces/{TRACE}, jobs {args.first} to {args.first + args.jobs - 1}",
            "jobs": len(jobs),
            "jobs_per_team": {t: sum(1 for j in jobs if j.user == t) for t in TEAMS},
            "cluster": args.cluster,
            "guarantees": guarantees(cluster),
        },
        "command": "benchmarks/teams_hetero.py " + " ".join(sys.argv[1:]),
        "policies": {},
    }
    for pol in args.policies.split(","):
        for sc in SCENARIOS:
            r = run(pol, sc, jobs, args)
            out["policies"].setdefault(pol, {})[sc] = r
            print(pol, sc, json.dumps({k: v for k, v in r.items() if k != "teams"}), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
