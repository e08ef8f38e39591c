"""The live cycle at scale (issue #33, item 2): 1,000 GPUs of three types, 10,000 queued
jobs, arrivals and completions flowing, through the live scheduler's own cycle code and
its real SQLite store, the incremental store and the whole-state one side by side.

What is real: :class:`~lyra_ray.runtime.cycle.LiveCycle` (the one loop as the actor wires
it), its SQLite inbox (every job is queued there as the SDK queues it), its store and
archive in a real SQLite file (WAL, ``synchronous=FULL``), the live defaults of
:class:`~lyra_ray.runtime.config.SchedulerConfig` (round 360 s, minimum lease 30 s,
backfill on, every change adopted at the next round). What is faked, because 1,000 real
GPUs are not here: Ray Train (the executor) is the simulator's fluid job model, and Ray
Serve (no inference pool here) a replay with no demand, as in ``tests/sim/
test_one_loop.py``; the wall clock is a virtual one that advances ``--period`` seconds
per cycle (the live poll period is 1 s; 2 s here, so a measured window spans rounds).

The first ``--warm`` cycles fast-forward two virtual hours (unmeasured), so that jobs
finish while the rest are measured. Arrivals replace completions: before every cycle
the clock queues as many new jobs as keep ``queued`` jobs waiting, so the queue stays at
its size while jobs finish. Job sizes are log-uniform (10 GPU-minutes to 100 GPU-hours).

    .venv/bin/python benchmarks/scale_cycle.py            # writes benchmarks/results/scale.json

``--teams 4`` adds the case with four limited teams (issue #42): jobs dealt to them in
turn, each guaranteed a fifth of every GPU type (the last fifth no guarantee covers),
borrowing what the others leave idle; the policy runs inside the teams wrapper
(:func:`lyra_ray.policies.teams.with_teams`, what the live scheduler builds once a
limited team exists), with the incremental store.

Reported per policy, queue size, store and teams: cycle p50/p99/max (wall seconds of fold ->
decide -> commit -> apply -> commit), the collector's and SQLite's WAL checkpoints between
cycles (:mod:`lyra_ray.runtime.gc_pacing`, :mod:`lyra_ray.runtime.wal_pacing`: not in a
cycle, reported beside it), the host's load average beside them, commit bytes
and seconds (all cycles, and the cycles in which the queue did not change), the process's
peak RSS. Timings vary with the host: compare rows of the same run only.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray import model as m  # noqa: E402
from lyra_ray.model import JobSpec, Node  # noqa: E402
from lyra_ray.model.state import spec_to_dict  # noqa: E402
from lyra_ray.model.teams import TeamSet, parse_teams  # noqa: E402
from lyra_ray.model.throughput import SpecThroughputs  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.policies.teams import with_teams  # noqa: E402
from lyra_ray.runtime.archive import JobArchive  # noqa: E402
from lyra_ray.runtime.config import SchedulerConfig  # noqa: E402
from lyra_ray.runtime.cycle import Inbox, LiveCycle, LiveStore  # noqa: E402
from lyra_ray.runtime.store import StateStore  # noqa: E402
from lyra_ray.scheduling.core import SchedulerCore  # noqa: E402
from lyra_ray.scheduling.interfaces import default_rounds  # noqa: E402
from lyra_ray.scheduling.loop import Cycle  # noqa: E402
from tests.sim.test_one_loop import DemandReplay, FluidExecutor  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "scale.json"
WARM_S = 7_200.0
"""Virtual seconds the warm-up cycles span before the measured ones."""
TYPES = {"v100": 1.0, "p100": 0.6, "k80": 0.25}
"""Three GPU types and a typical job's relative speed on each."""


def cluster() -> list[Node]:
    """1,000 GPUs: 42 + 42 + 41 servers of eight."""
    counts = {"v100": 42, "p100": 42, "k80": 41}
    return [Node(f"{g}-{i:03d}", g, 8) for g, n in counts.items() for i in range(n)]


def teams_of(n: int) -> TeamSet | None:
    """``n`` limited teams, each guaranteed a fifth of every type of :func:`cluster`."""
    if n <= 0:
        return None
    gpus: dict[str, int] = {}
    for node in cluster():
        gpus[node.gpu_type] = gpus.get(node.gpu_type, 0) + node.num_gpus
    quota = ",".join(f"{g}={c // 5}" for g, c in sorted(gpus.items()))
    names = [f"team{i}" for i in range(n)]
    raw = {"teams": {t: {"quota": quota} for t in names}, "users": {t: t for t in names}}
    return parse_teams(raw, "scale_cycle", gpus)


def job(rng: random.Random, i: int, teams: int = 0) -> JobSpec:
    """Rigid 1-8-worker jobs and elastic ones, log-uniform in size (the ``i``-th goes to
    team ``i mod teams``)."""
    gpu_s = math.exp(rng.uniform(math.log(600.0), math.log(360_000.0)))
    elastic = rng.random() < 0.3
    workers = rng.choice((1, 1, 1, 2, 2, 4, 8))
    speed = rng.uniform(0.5, 2.0)
    tput = {g: round(speed * f * rng.uniform(0.8, 1.2), 4) for g, f in TYPES.items()}
    return JobSpec(
        name=f"s{i}",
        total_steps=round(gpu_s * speed / workers, 1),
        min_workers=1 if elastic else workers,
        max_workers=8 if elastic else workers,
        throughput=tput,
        user=f"team{i % teams}" if teams else "default",
    )


class SteadyQueue:
    """A virtual clock: ``period`` seconds a cycle, the core's wakeup if sooner, and before
    each cycle as many submissions (into the SQLite inbox) as keep ``queued`` jobs waiting."""

    def __init__(
        self,
        store: StateStore,
        core: SchedulerCore,
        executor: FluidExecutor,
        queued: int,
        period: float,
        cycles: int,
        seed: int,
        teams: int = 0,
    ) -> None:
        self.store, self.core, self.executor = store, core, executor
        self.teams = teams
        self.queued, self.period, self.left = queued, period, cycles
        self.rng = random.Random(seed)
        self.warm, self.warm_period = 0, period
        """Cycles left to fast-forward through, ``warm_period`` apart (see :func:`run`)."""
        self.now: float | None = None
        self.next_id = 0
        self.submitted: list[int] = []
        """New submissions before each cycle (0: the queue did not change from outside)."""

    def next(self, wakeup: float | None) -> float | None:
        if self.left <= 0:
            return None
        self.left -= 1
        step = self.warm_period if self.warm > 0 else self.period
        self.warm -= 1
        t = 0.0 if self.now is None else self.now + step
        if wakeup is not None and self.now is not None:
            t = min(t, max(wakeup, self.now))
        self.now = t
        waiting = sum(1 for j in self.core.state.active_jobs() if j.current is None)
        want = self.queued - waiting - len(self.store.pending())
        for _ in range(max(0, want)):
            self.submit()
        self.submitted.append(max(0, want))
        return t

    def submit(self) -> None:
        spec = job(self.rng, self.next_id, self.teams)
        jid = f"{self.next_id:07d}"
        self.next_id += 1
        self.executor.register(jid, spec)
        self.store.enqueue("submit", jid, spec_to_dict(spec))


class Timings:
    """The loop's observer: each cycle's wall seconds, events and whether it committed."""

    def __init__(self, live: LiveStore) -> None:
        self.live = live
        self.rows: list[dict[str, Any]] = []
        self.next_round: float | None = None

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        # a round boundary moves the round clock (the first round's start sets it)
        boundary = core.state.next_round_s != self.next_round
        self.next_round = core.state.next_round_s
        self.rows.append(
            {
                "boundary": boundary,
                "cycle_s": time.perf_counter() - cycle.started,
                "step_s": cycle.step_s,
                "events": len(cycle.events),
                "actions": len(cycle.decision.actions),
                "commits": len(self.live.commits),
                "changed": any(
                    isinstance(e, (m.JobSubmitted, m.JobCompleted, m.JobFailed, m.JobCancelled))
                    for e in cycle.events
                ),
            }
        )


def run(
    policy: str,
    queued: int,
    store_kind: str,
    cycles: int,
    warm: int,
    period: float,
    teams: int = 0,
) -> dict[str, Any]:
    cfg = SchedulerConfig()
    model = SpecThroughputs()
    pol = get_policy(policy)
    team_set = teams_of(teams)
    core = SchedulerCore(
        pol if team_set is None else with_teams(pol, team_set),
        model,
        cfg.round_s,
        rounds=default_rounds(pol, min_reset_interval_s=cfg.min_reset_interval_s),
        min_lease_s=cfg.min_lease_s,
        startup_grace_s=cfg.startup_grace_s,
        backfill=cfg.backfill,
    )
    with tempfile.TemporaryDirectory(prefix="lyra-scale-") as tmp:
        store = StateStore(tmp)
        executor = FluidExecutor(cluster(), model)
        serving = DemandReplay([])
        live = LiveStore(store, Inbox(store, core), executor, serving, JobArchive(store))
        live.incremental = store_kind == "incremental"
        timings = Timings(live)
        loop = LiveCycle(core, live, executor, serving, (timings,))
        clock = SteadyQueue(
            store, core, executor, queued, period, warm + cycles, seed=7, teams=teams
        )
        # Warm-up fast-forwards two hours in ``warm`` cycles, so that jobs have run and
        # some finish while we measure (a cold queue under fair sharing finishes nothing
        # for hours).
        clock.warm, clock.warm_period = warm, WARM_S / max(1, warm)
        gc.collect()
        t0 = time.perf_counter()
        loop.run(clock)
        wall = time.perf_counter() - t0
        rows = timings.rows[warm:]
        bounds = [timings.rows[warm - 1]["commits"] if warm else 0] + [r["commits"] for r in rows]
        commits = live.commits
        # a cycle's commits: before its actions and after them (both are its write)
        per_cycle = [commits[a:b] for a, b in itertools.pairwise(bounds)]
        measured = [c for cs in per_cycle for c in cs]
        submitted = clock.submitted[warm:]
        quiet = [
            sum(c["bytes"] for c in cs)
            for r, cs, n in zip(rows, per_cycle, submitted, strict=False)
            if not r["changed"] and n == 0 and cs
        ]
        cyc = sorted(r["cycle_s"] for r in rows)
        # the paced collector's pauses between the measured cycles (not in ``cyc``)
        pauses = sorted(s for _, s in loop.gc.pauses[warm:])
        fulls = [s for g, s in loop.gc.pauses[warm:] if g == 2]
        ckpts = sorted(loop.wal.pauses[warm:])  # the WAL checkpoints between them
        out = {
            "policy": policy,
            "queued": queued,
            "store": store_kind,
            "teams": teams,
            "cycles": len(rows),
            "virtual_s": clock.now,
            "wall_s": round(wall, 2),
            "cycle_p50_ms": _ms(statistics.median(cyc)),
            "cycle_p99_ms": _ms(_p99(cyc)),
            "cycle_max_ms": _ms(cyc[-1]),
            "step_p50_ms": _ms(statistics.median(r["step_s"] for r in rows)),
            "step_p99_ms": _ms(_p99(sorted(r["step_s"] for r in rows))),
            "boundary_cycles": sum(1 for r in rows if r["boundary"]),
            "boundary_cycle_max_ms": _ms(
                max((r["cycle_s"] for r in rows if r["boundary"]), default=0.0)
            ),
            "other_cycle_max_ms": _ms(
                max((r["cycle_s"] for r in rows if not r["boundary"]), default=0.0)
            ),
            "gc_between_p50_ms": _ms(statistics.median(pauses)) if pauses else None,
            "gc_between_p99_ms": _ms(_p99(pauses)) if pauses else None,
            "gc_full_count": len(fulls),
            "gc_full_max_ms": _ms(max(fulls)) if fulls else None,
            "wal_between_p50_ms": _ms(statistics.median(ckpts)) if ckpts else None,
            "wal_between_p99_ms": _ms(_p99(ckpts)) if ckpts else None,
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "active_jobs_end": len(core.state.active_jobs()),
            "running_end": sum(1 for j in core.state.active_jobs() if j.current is not None),
            "archived": JobArchive(store).count(),
            "commits": len(measured),
            "commit_bytes_p50": int(statistics.median(c["bytes"] for c in measured)),
            "commit_ms_p50": _ms(statistics.median(c["commit_s"] for c in measured)),
            "commit_ms_p99": _ms(_p99(sorted(c["commit_s"] for c in measured))),
            "quiet_cycles": len(quiet),
            "quiet_cycle_bytes_p50": int(statistics.median(quiet)) if quiet else None,
            "quiet_cycle_bytes_max": max(quiet) if quiet else None,
            "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "db_mb": round(sum(f.stat().st_size for f in Path(tmp).iterdir()) / 2**20, 1),
        }
        store.close()
        return out


def _ms(x: float) -> float:
    return round(1e3 * x, 2)


def _p99(xs: Sequence[float]) -> float:
    """The 99th percentile of sorted ``xs`` (nearest rank)."""
    return xs[min(len(xs) - 1, math.ceil(0.99 * len(xs)) - 1)]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--policies", nargs="+", default=["max_min_fairness_perf", "lyra"])
    ap.add_argument("--queued", nargs="+", type=int, default=[1000, 10000])
    ap.add_argument("--stores", nargs="+", default=["incremental", "whole"])
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--period", type=float, default=2.0)
    ap.add_argument(
        "--teams",
        nargs="+",
        type=int,
        default=[0, 4],
        help="limited teams per case (0: none); cases with teams use the incremental store",
    )
    ap.add_argument("--out", default=str(OUT), help='"" writes nothing')
    ap.add_argument("--one", action="store_true", help="run one configuration in-process")
    args = ap.parse_args(argv)
    if args.one:  # a child: its peak RSS is its own run's
        r = run(
            args.policies[0],
            args.queued[0],
            args.stores[0],
            args.cycles,
            args.warm,
            args.period,
            args.teams[0],
        )
        print(json.dumps(r), flush=True)
        return
    rows = []
    for policy in args.policies:
        for queued in args.queued:
            for kind in args.stores:
                for teams in args.teams:
                    if teams and kind != "incremental":
                        continue
                    cmd = [sys.executable, __file__, "--one", "--policies", policy]
                    cmd += ["--queued", str(queued), "--stores", kind]
                    cmd += ["--cycles", str(args.cycles), "--teams", str(teams)]
                    cmd += ["--warm", str(args.warm), "--period", str(args.period)]
                    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
                    r = json.loads(done.stdout.strip().splitlines()[-1])
                    print(json.dumps(r), flush=True)
                    rows.append(r)
    if args.out:
        meta = {
            "command": "python benchmarks/scale_cycle.py " + " ".join(sys.argv[1:]),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "gpus": sum(n.num_gpus for n in cluster()),
            "period_s": args.period,
            "warm": args.warm,
            "warm_s": WARM_S,
            "round_s": SchedulerConfig().round_s,
        }
        Path(args.out).write_text(json.dumps({**meta, "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
