"""The incremental store (issue #33, item 1): it writes what a cycle changed, and what it
holds is exactly what the whole-state store would hold, crash or no crash.

- Every cycle of a live run (the live cycle code over a real SQLite file, Ray replaced as
  in ``test_one_loop``) the store reloads to the whole state, through JSON.
- A commit of a cycle that changed nothing a job holds writes no job.
- A writer SIGKILLed in the middle of an incremental commit (job rows and parts written,
  the transaction not committed) leaves the last whole commit: a restart loads the state
  that the same run, never crashed, held after that commit, and decides as it does.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lyra_ray import model as m
from lyra_ray.model.state import job_to_dict
from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.store import Delta, StateStore
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle
from tests.sim.incremental_writer import build, whole_state
from tests.sim.test_restart_decides_alike import WORKLOADS, _next_events

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ["lyra", "max_min_fairness_perf"]


def _json(x: Any) -> Any:
    return json.loads(json.dumps(x, sort_keys=True))


class Reloads:
    """An observer: after every cycle the store reloads to the whole state."""

    def __init__(self, store: StateStore, live: Any) -> None:
        self.store, self.live = store, live
        self.checked = 0

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        assert self.store.load() == _json(whole_state(self.live, core)), core.now
        self.checked += 1


@pytest.mark.parametrize("policy", POLICIES)
def test_every_commit_reloads_to_the_whole_state(tmp_path: Path, policy: str) -> None:
    store = StateStore(tmp_path)
    cycle, clock, live, core = build(store, policy)
    check = Reloads(store, live)
    cycle.observers = (check,)
    writes: list[Delta] = []
    commit_delta = store.commit_delta

    def logged(delta: Delta, *args: Any) -> int:
        writes.append(delta)
        return commit_delta(delta, *args)

    store.commit_delta = logged  # type: ignore[method-assign]
    cycle.run(clock)
    assert check.checked > 20 and live.incremental
    assert store.pending() == [] and core.jobs == {}
    # After the first commit, a spec is written once (the job's first commit) and every
    # commit writes fewer jobs than the whole state holds, most of them none at all.
    assert writes[0].reset and not any(d.reset for d in writes[1:])
    new = [jid for d in writes for jid in d.new]
    assert len(new) == len(set(new)) == 12
    assert sum(1 for d in writes if not d.jobs) > len(writes) // 4
    # a whole-state commit in between, then incremental again: each replaces the other
    live.incremental = False
    live.save(core, [])
    live.incremental = True
    live.save(core, [])
    assert store.load() == _json(whole_state(live, core))


def test_a_spec_is_copied_from_its_inbox_row_not_serialised_again(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.enqueue("submit", "j1", {"name": "j1", "total_steps": 5.0, "throughput": {"v100": 1}})
    called: list[str] = []

    def spec_of() -> str:
        called.append("j1")
        return "{}"

    record = json.dumps({"arrival_s": 0.0})
    store.commit_delta(Delta(jobs=[("j1", record)], new={"j1": spec_of}, parts=[("core", "{}")]))
    store.commit_delta(Delta(jobs=[("j2", record)], new={"j2": spec_of}, parts=[]))
    saved = store.load()
    assert saved is not None
    specs = {d["id"]: d["spec"] for d in saved["core"]["jobs"]}
    assert specs["j1"]["name"] == "j1" and called == ["j1"]  # j2 had no inbox row


def _kill_mid_commit(state_dir: Path, policy: str, after: int) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.sim.incremental_writer", str(state_dir), policy, str(after)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert line.startswith("mid "), line
    return int(line.split()[1])


@pytest.mark.parametrize(("policy", "after"), [("lyra", 9), ("max_min_fairness_perf", 14)])
def test_a_writer_killed_mid_commit_restarts_to_the_same_decision(
    tmp_path: Path, policy: str, after: int
) -> None:
    killed_at = _kill_mid_commit(tmp_path / "state", policy, after)
    db = sqlite3.connect(tmp_path / "state" / "lyra.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    # The same run, never crashed, up to the last commit before the killed one.
    ref_store = StateStore(tmp_path / "ref")
    cycle, clock, live, ref = build(ref_store, policy, stop_after=killed_at - 1)
    cycle.run(clock)
    assert live.saves == killed_at - 1
    store = StateStore(tmp_path / "state")
    saved = store.load()
    assert saved is not None
    assert saved == _json(whole_state(live, ref))  # the last whole commit, nothing of the next
    assert any(j["current"] for j in saved["core"]["jobs"])  # mid-workload: jobs run
    # A restarted scheduler's core, from what the killed writer left, decides alike.
    twin = SchedulerCore(get_policy(policy), WORKLOADS["loan"]()[2], round_s=ref.round_s)
    twin.load_state(saved["core"])
    assert twin.to_state() == _json(ref.to_state())
    spec = next(iter(ref.jobs.values())).spec if ref.jobs else WORKLOADS["loan"]()[1][0]
    for t, events in _next_events(ref, spec):
        assert twin.step(t, events) == ref.step(t, events), (policy, t)
    assert twin.to_state() == ref.to_state()
    assert {job_to_dict(j)["id"] for j in twin.jobs.values()} == set(ref.jobs)
    assert isinstance(twin.allocation, m.Allocation)
