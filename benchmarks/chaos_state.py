"""Bounded state (issue #17, item 7): bytes and time of each commit as finished jobs pile up.

Jobs arrive ``--batch`` per cycle, launch, report progress (with a measured rate, so the
throughput model learns per job name) and complete the next cycle, until ``--finished``
jobs have ended. Each cycle does what ``GlobalScheduler.cycle`` does, with the real code
and only Ray's calls stubbed: inbox rows through the real ``StateStore``, the real core
(``fifo``), the real ``RayRuntime`` bookkeeping (generations, runs, launches),
``hand_out_terminal`` into the real archive, and two commits (before and after applying
the actions) of the same state dict the scheduler writes. Side by side, the same
workload without the archive (terminal jobs kept, nothing forgotten, the learned
throughputs unbounded): what every commit cost before issue #17.

    python benchmarks/chaos_state.py [--finished 10000] [--baseline-finished 3000] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _Remote:
    def remote(self, *args: Any) -> None:
        return None


class _Control:
    """The control actor's methods the runtime calls while applying, as no-ops."""

    forget = _Remote()
    request_stop = _Remote()


def _stub_ray() -> None:
    from lyra_ray.runtime import ray_runtime, runs

    runs.start_run = lambda req: None  # type: ignore[assignment]
    runs.kill_run = lambda job, gen: True  # type: ignore[assignment]
    runs.request_stop = lambda job, gen: None  # type: ignore[assignment]
    ray_runtime.get_or_create_control = _Control  # type: ignore[assignment]


def run(finished: int, batch: int, archive_on: bool, sample_every: int) -> dict[str, Any]:
    from lyra_ray import model as m
    from lyra_ray.model.spec import parse_job_spec
    from lyra_ray.model.state import spec_from_dict, spec_to_dict
    from lyra_ray.model.throughput import MeasuredThroughputs, catalogue_throughputs
    from lyra_ray.policies.base import get_policy
    from lyra_ray.runtime.archive import JobArchive, hand_out_terminal
    from lyra_ray.runtime.ray_runtime import RayRuntime
    from lyra_ray.runtime.store import StateStore
    from lyra_ray.scheduling.core import SchedulerCore, default_rounds

    store = StateStore(tempfile.mkdtemp(prefix="lyra-chaos-state-"))
    archive = JobArchive(store)
    policy = get_policy("fifo")
    thr = MeasuredThroughputs(
        catalogue_throughputs(), **({} if archive_on else {"max_rows": 10**9})
    )
    core = SchedulerCore(policy, thr, 60.0, rounds=default_rounds(policy, min_reset_interval_s=0.0))
    runtime = RayRuntime(lambda j: core.jobs[j].spec, "/tmp/lyra-chaos-state-ckpt")
    reasons: dict[str, str] = {}
    nodes = [m.Node(f"{g}-{i}", g, 4) for g in ("v100", "p100", "k80") for i in range(8)]
    core.step(0.0, [m.NodeUp(n) for n in nodes])
    runtime.inventory.nodes = {n.id: n for n in nodes}
    runtime.inventory.gpu_label = {n.id: n.gpu_type for n in nodes}
    spec = {
        "total_steps": 100,
        "workers": 1,
        "entrypoint": "lyra_ray.jobs.train_example:train_loop",
    }
    spec["throughput"] = {"v100": 2.0, "p100": 1.0, "k80": 0.5}
    commits: list[tuple[int, int, float, int]] = []  # (finished, bytes, seconds, jobs in state)
    ended = submitted = cycle = 0

    def commit(consumed: list[int]) -> None:
        state = {
            "core": core.to_state(),
            "runtime": runtime.to_state(),
            "serving": {},
            "reasons": reasons,
            "restarts": 0,
        }
        rows = archive.rows()
        t0 = time.perf_counter()
        size = store.commit(state, consumed, rows)
        commits.append((ended, size, time.perf_counter() - t0, len(core.jobs)))
        archive.committed(len(rows))

    while ended < finished:
        cycle += 1
        for _ in range(batch):
            submitted += 1
            raw = {**spec, "name": f"job-{submitted}"}
            store.enqueue("submit", f"job-{submitted}", spec_to_dict(parse_job_spec(raw)))
        rows = store.pending()
        events: list[m.Event] = [
            m.JobSubmitted(jid, spec_from_dict(payload)) for _s, _k, jid, payload in rows
        ]
        for jid, r in list(runtime.runs.items()):  # last cycle's launches: a rate, then done
            events.append(m.JobProgress(jid, 50.0, 1.0))
            events += runtime._ended(r, "completed", 100.0, "")
        ended += sum(1 for e in events if isinstance(e, m.JobCompleted))
        # one round per cycle: every cycle launches
        decision = core.step(60.0 * cycle, events)
        if archive_on:
            hand_out_terminal(core, archive, runtime, reasons)
        commit([s for s, *_ in rows])
        if decision.actions:
            runtime.apply(decision.actions)
            commit([])
    return _summary(commits, sample_every, finished, archive.count(), len(thr.measured))


def _summary(
    commits: list[tuple[int, int, float, int]], every: int, finished: int, archived: int, rows: int
) -> dict[str, Any]:
    points = []
    for mark in range(0, finished + 1, every):
        window = [c for c in commits if mark - every < c[0] <= mark] or [
            c for c in commits if c[0] == mark
        ]
        if not window:
            continue
        secs = sorted(c[2] for c in window)
        points.append(
            {
                "finished": mark,
                "commits": len(window),
                "bytes_mean": round(statistics.fmean(c[1] for c in window)),
                "bytes_max": max(c[1] for c in window),
                "commit_ms_mean": round(1e3 * statistics.fmean(secs), 3),
                "commit_ms_p99": round(1e3 * secs[min(len(secs) - 1, int(0.99 * len(secs)))], 3),
                "jobs_in_state_max": max(c[3] for c in window),
            }
        )
    return {
        "commits": len(commits),
        "archived": archived,
        "measured_throughput_rows": rows,
        "points": points,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--finished", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=25, help="arrivals (and completions) per cycle")
    ap.add_argument("--sample-every", type=int, default=1000)
    ap.add_argument(
        "--baseline-finished",
        type=int,
        default=3000,
        help="finished jobs for the run without archive (0: skip it); its commits grow "
        "with every finished job, so 10,000 would take most of an hour here",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "chaos_state.json"))
    args = ap.parse_args(argv)
    _stub_ray()
    from lyra_ray.runtime.store import SYNCHRONOUS

    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "command": "python benchmarks/chaos_state.py " + " ".join(argv or sys.argv[1:]),
        "finished": args.finished,
        "batch": args.batch,
        "synchronous": SYNCHRONOUS,
        "archive": run(args.finished, args.batch, True, args.sample_every),
    }
    if args.baseline_finished > 0:
        n = min(args.finished, args.baseline_finished)
        out["no_archive"] = run(n, args.batch, False, args.sample_every)
    for key in ("archive", "no_archive"):
        pts = out.get(key, {}).get("points", [])
        if len(pts) >= 2 and pts[1]["bytes_mean"]:
            out[key]["bytes_last_over_first_1000"] = round(
                pts[-1]["bytes_mean"] / pts[1]["bytes_mean"], 3
            )
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    for key in ("archive", "no_archive"):
        for p in out.get(key, {}).get("points", []):
            print(
                f"{key:10s} finished {p['finished']:6d}: {p['bytes_mean']:>10,d} B/commit, "
                f"{p['commit_ms_mean']:7.2f} ms mean, {p['commit_ms_p99']:7.2f} ms p99"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
