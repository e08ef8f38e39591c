"""What the live teams layer costs one decision at a long queue (#32), without Ray.

The live scheduler calls its policy through ``LiveTeamPolicy``
(:mod:`lyra_ray.runtime.teams.policy`): with only the unlimited ``default`` team it calls
the policy as it is; with limited teams it maps every job to its team
(``TeamRegistry.for_snapshot``) and runs the simulator's ``with_teams`` bounds
around the policy. This times, on one snapshot of ``--jobs`` jobs (20 running, the rest
queued, 8 users, 64 V100 + 64 K80), the policy alone, behind the live layer with only
``default``, and behind it with four limited teams; and apart, the job -> team map and
the wrapper on a prebuilt team set. Median of ``--repeats`` calls each.

    .venv/bin/python benchmarks/teams_live_overhead.py
    # -> benchmarks/results/teams_live_overhead.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.model.throughput import catalogue_throughputs  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.policies.teams import with_teams  # noqa: E402
from lyra_ray.runtime.auth import Users  # noqa: E402
from lyra_ray.runtime.store import StateStore  # noqa: E402
from lyra_ray.runtime.teams.policy import live_team_policy  # noqa: E402
from lyra_ray.runtime.teams.registry import TeamRegistry  # noqa: E402
from lyra_ray.runtime.teams.store import TeamStore  # noqa: E402
from tests.unit.teams_helpers import cluster, job  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "teams_live_overhead.json"


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    xs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return round(statistics.median(xs) * 1e3, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    store = StateStore(tempfile.mkdtemp(prefix="lyra-teams-bench-"))
    users = Users(store)
    admin = users.add("root", True, None)["token"]
    job_teams: dict[str, str] = {}
    reg = TeamRegistry(
        TeamStore(store.path),
        users,
        lambda: {"v100": 64, "k80": 64},
        catalogue_throughputs(),
        job_teams.get,
    )
    jobs = [
        job(
            f"j{i}",
            f"u{i % 8}",
            1 + i % 4,
            running=(1 + i % 4) if i < 20 else 0,
            started=0.0 if i < 20 else None,
            arrival=float(i),
        )
        for i in range(args.jobs)
    ]
    snap = cluster(jobs, v100=64, k80=64)
    rows: dict[str, dict[str, float]] = {}
    for name in ("fifo", "lyra"):
        rows[name] = {
            "policy_alone_ms": _median_ms(
                lambda n=name: get_policy(n).allocate(snap), args.repeats
            ),
            "live_layer_default_only_ms": _median_ms(
                lambda n=name: live_team_policy(get_policy(n), reg.for_snapshot).allocate(snap),
                args.repeats,
            ),
        }
    for i in range(4):
        reg.add(f"t{i}", {"quota": "v100=16,k80=16"}, admin)
    job_teams.update({f"j{i}": f"t{i % 4}" for i in range(args.jobs)})
    for name in ("fifo", "lyra"):
        rows[name]["live_layer_four_teams_ms"] = _median_ms(
            lambda n=name: live_team_policy(get_policy(n), reg.for_snapshot).allocate(snap),
            args.repeats,
        )
    teams = reg.for_snapshot(snap)
    parts = {
        "job_team_map_ms": _median_ms(lambda: reg.for_snapshot(snap), args.repeats),
        "with_teams_lyra_prebuilt_set_ms": _median_ms(
            lambda: with_teams(get_policy("lyra"), teams).allocate(snap), args.repeats
        ),
    }
    out = {
        "jobs": args.jobs,
        "running": 20,
        "cluster": "v100=64,k80=64",
        "repeats": args.repeats,
        "policies": rows,
        "parts": parts,
        "host": platform.node(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
