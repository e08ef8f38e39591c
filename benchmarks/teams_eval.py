"""Teams, quotas and borrowing (#32) in the simulator: no quotas vs hard quotas vs borrowing.

Workload (docs/teams.md): a week of real Philly submissions (``pollux/philly.csv``,
2017-11-01 to 2017-11-08) from its four largest virtual clusters, each VC one team (its
jobs' owner is the VC). Real arrivals, real GPU counts (<= 16), durations clipped at
8 h; a seeded 30 % of the jobs are elastic with a measured Pollux scaling curve (``min
= max(1, g // 2)``, ``max = 2 g``, requested ``g``), as in ``benchmarks/lyra_eval.py``.
Demand is skewed and bursty per VC. Cluster: ``--gpus`` V100s (one GPU per server, so
placement never fragments); each team is guaranteed an equal quarter.

Scenarios, one run each, same jobs, policy ``lyra`` (no inference pool here):

* ``no_quotas``: the policy alone (the guarantees are only measured against);
* ``hard_quotas``: the teams wrapper with ``borrow_limit: 0``;
* ``borrowing``: the teams wrapper, borrowing unlimited, reclaim on demand;
* ``borrowing_pin``: the same with ``enforce: pin``, the enforcement before issue #42
  (each job admitted onto one GPU type and pinned there).

Per team: mean JCT and queueing; the share of its guarantee it got when it asked
(``∫ min(used, asked) dt / ∫ asked dt``, where asked is what the team's active jobs'
minimum sizes fill of its guarantee ``g``, first fit, running jobs first then by
arrival: a 16-GPU job of a team guaranteed 12 asks nothing of the guarantee); the time
it spent one GPU or more short of that beyond the grace period (``--grace-s``) into a
shortfall, and its longest shortfall; cluster utilisation. Each cluster size of
``--gpus`` runs all three scenarios.

    .venv/bin/python benchmarks/teams_eval.py          # -> benchmarks/results/teams_eval.json
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lyra_ray.model import JobSpec, Node, scaling
from lyra_ray.model.restart_cost import RESTART_S
from lyra_ray.model.teams import TeamSet, parse_teams
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import Policy, get_policy
from lyra_ray.policies.teams import with_teams
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle
from lyra_ray.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "teams_eval.json"
VCS = ("6214e9", "6c71a0", "11cb48", "b436b2")
CURVES = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
SCENARIOS = ("no_quotas", "hard_quotas", "borrowing", "borrowing_pin")


def shared_data() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


def philly_jobs(path: Path, start: str, end: str, seed: int, elastic: float) -> list[JobSpec]:
    """The window's jobs of the four VCs, owner = VC (module docstring)."""
    rows = [
        r
        for r in csv.DictReader(path.open())
        if r["cluster"] in VCS
        and start <= r["timestamp"] < end
        and float(r["duration"]) > 0
        and 1 <= int(r["num_gpus"]) <= 16
    ]
    rows.sort(key=lambda r: (r["timestamp"], r["cluster"], r["duration"]))
    t0 = dt.datetime.fromisoformat(rows[0]["timestamp"]).timestamp()
    rnd = random.Random(seed)
    jobs = []
    for i, r in enumerate(rows):
        arrival = dt.datetime.fromisoformat(r["timestamp"]).timestamp() - t0
        d, g = max(1.0, min(float(r["duration"]), 8 * 3600.0)), int(r["num_gpus"])
        common: dict[str, Any] = {"throughput": {"v100": 1.0}, "arrival_s": arrival}
        if rnd.random() < elastic:
            curve = rnd.choice(CURVES)
            spec = JobSpec(
                name=f"p{i}", total_steps=d * scaling.speedup(curve, g),
                min_workers=max(1, g // 2), max_workers=2 * g, scaling=curve,
                user=r["cluster"], config={"requested_workers": g}, **common,
            )  # fmt: skip
        else:
            spec = JobSpec(f"p{i}", d * g, g, g, user=r["cluster"], **common)
        jobs.append(spec)
    return jobs


def offered(jobs: list[JobSpec], vc: str) -> float:
    """GPU-hours the team's jobs take at their requested sizes (their Philly durations)."""
    total = 0.0
    for j in jobs:
        if j.user != vc:
            continue
        g = int(j.config.get("requested_workers", j.min_workers))  # type: ignore[call-overload]
        total += j.total_steps / scaling.speedup(j.scaling, g) * g if j.elastic else j.total_steps
    return total / 3600


def team_set(gpus: int, borrow: bool, enforce: str = "inside") -> TeamSet:
    share = gpus // len(VCS)
    body: dict[str, Any] = {"quota": f"v100={share}"}
    if not borrow:
        body["borrow_limit"] = 0
    raw = {
        "teams": {vc: dict(body) for vc in VCS},
        "users": {vc: vc for vc in VCS},
        "enforce": enforce,
    }
    return parse_teams(raw, "teams_eval", {"v100": gpus})


class TeamMeter:
    """The loop's observer: each team's asked and used GPUs, integrated over time."""

    def __init__(self, guarantee: dict[str, float], grace_s: float) -> None:
        self.g, self.grace = guarantee, grace_s
        self.last_t: float | None = None
        self.state: dict[str, tuple[float, float]] = {}
        self.entitled = dict.fromkeys(guarantee, 0.0)
        self.got = dict.fromkeys(guarantee, 0.0)
        self.short_since: dict[str, float | None] = dict.fromkeys(guarantee)
        self.short_beyond = dict.fromkeys(guarantee, 0.0)
        self.worst = dict.fromkeys(guarantee, 0.0)

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        self.advance(cycle.now)
        asked = dict.fromkeys(self.g, 0.0)
        used = dict.fromkeys(self.g, 0.0)
        active = sorted(core.active(), key=lambda j: (j.current is None, j.arrival_s))
        for j in active:  # asked: what first-fit packs into the guarantee
            t = j.spec.user
            if t in asked:
                if asked[t] + j.spec.min_workers <= self.g[t]:
                    asked[t] += j.spec.min_workers
                used[t] += j.current.workers if j.current is not None else 0
        self.state = {t: (asked[t], used[t]) for t in self.g}
        for t, (a, u) in self.state.items():
            short = a - min(u, a) >= 1.0
            if short and self.short_since[t] is None:
                self.short_since[t] = cycle.now
            elif not short:
                self.short_since[t] = None

    def advance(self, now: float) -> None:
        if self.last_t is not None and now > self.last_t:
            dt_s = now - self.last_t
            for t, (a, u) in self.state.items():
                self.entitled[t] += a * dt_s
                self.got[t] += min(u, a) * dt_s
                since = self.short_since[t]
                if since is not None:
                    over = max(0.0, now - max(since + self.grace, self.last_t))
                    self.short_beyond[t] += over
                    self.worst[t] = max(self.worst[t], now - since)
        self.last_t = now


def run(scenario: str, jobs: list[JobSpec], args: argparse.Namespace) -> dict[str, Any]:
    nodes = [Node(f"v{i:03d}", "v100", 1) for i in range(args.gpus)]
    policy: Policy = get_policy(args.policy)
    if scenario != "no_quotas":
        borrow = scenario.startswith("borrowing")
        enforce = "pin" if scenario.endswith("_pin") else "inside"
        policy = with_teams(policy, team_set(args.gpus, borrow, enforce))
    meter = TeamMeter(dict.fromkeys(VCS, float(args.gpus // len(VCS))), args.grace_s)
    sim = Simulator(
        nodes, policy, SpecThroughputs(), resize_overhead_s=RESTART_S, observers=[meter]
    )
    t0 = time.perf_counter()
    res = sim.run(jobs)
    wall = time.perf_counter() - t0
    by_team: dict[str, dict[str, Any]] = {}
    for vc in VCS:
        recs = [r for r, s in zip(res.jobs, jobs, strict=True) if s.user == vc]
        jct = [r["jct_s"] for r in recs if r["jct_s"] is not None]
        queue = [r["queue_s"] for r in recs if r["queue_s"] is not None]
        by_team[vc] = {
            "jobs": len(recs),
            "finished": len(jct),
            "mean_jct_h": sum(jct) / len(jct) / 3600 if jct else None,
            "mean_queue_h": sum(queue) / len(queue) / 3600 if queue else None,
            "guarantee_share": meter.got[vc] / meter.entitled[vc] if meter.entitled[vc] else None,
            "asked_gpu_h": meter.entitled[vc] / 3600,
            "short_beyond_grace_h": meter.short_beyond[vc] / 3600,
            "worst_short_h": meter.worst[vc] / 3600,
        }
    s = res.summary
    return {
        "teams": by_team,
        "utilisation": s["gpu_usage_training"],
        "mean_jct_h": s["avg_jct_s"] / 3600,
        "mean_queue_h": s["avg_queue_s"] / 3600,
        "completed": s["completed_jobs"],
        "preemptions": s["preemptions"],
        "resizes": s["resizes"],
        "makespan_h": s["makespan_s"] / 3600,
        "wall_s": wall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="2017-11-01")
    ap.add_argument("--end", default="2017-11-08")
    ap.add_argument("--gpus", default="32,48", help="cluster sizes (V100s), comma-separated")
    ap.add_argument("--policy", default="lyra")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--elastic-share", type=float, default=0.3)
    ap.add_argument("--grace-s", type=float, default=360.0)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    philly = shared_data() / "pollux" / "philly.csv"
    if not philly.is_file():
        print(f"skipped: {philly} not found (set LYRA_SHARED_DATA)")
        return 0
    jobs = philly_jobs(philly, args.start, args.end, args.seed, args.elastic_share)
    sizes = [int(x) for x in str(args.gpus).split(",")]
    out: dict[str, Any] = {
        "workload": {
            "source": f"pollux/philly.csv VCs {', '.join(VCS)}, {args.start} to {args.end}",
            "jobs": len(jobs),
            "jobs_per_team": {vc: sum(1 for j in jobs if j.user == vc) for vc in VCS},
            "offered_gpu_h_per_team": {vc: offered(jobs, vc) for vc in VCS},
            "gpus": sizes,
            "guarantee_per_team": {str(g): g // len(VCS) for g in sizes},
            "policy": args.policy,
            "seed": args.seed,
            "elastic_share": args.elastic_share,
            "grace_s": args.grace_s,
            "resize_overhead_s": RESTART_S,
        },
        "command": "benchmarks/teams_eval.py " + " ".join(sys.argv[1:]),
        "scenarios": {},
    }
    for gpus in sizes:
        args.gpus = gpus
        for sc in SCENARIOS:
            res = run(sc, jobs, args)
            out["scenarios"].setdefault(str(gpus), {})[sc] = res
            print(gpus, sc, json.dumps({k: v for k, v in res.items() if k != "teams"}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
