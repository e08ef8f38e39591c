"""Every queued job says why it waits, through the live job desk (#30, item 5).

The desk is what ``lyra status``, ``lyra status JOB``, their ``--json`` forms and the SDK
read. Here it runs over its real SQLite store and the live loop's own cycle code, with
the simulator's fluid model in Ray Train's place (as in ``tests/sim/test_one_loop.py``):
a job still in the inbox is ``submitted``; after a cycle, each job that holds no GPUs
carries the core's reason.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from lyra_ray.model import Node
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.archive import JobArchive
from lyra_ray.runtime.auth import Users
from lyra_ray.runtime.boundary import Accepted, JobMeta
from lyra_ray.runtime.cycle import Inbox, LiveCycle, LiveStore
from lyra_ray.runtime.desk import JobDesk
from lyra_ray.runtime.restart_phases import RestartPhases
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.waiting import CODES
from tests.sim.test_one_loop import DemandReplay, FluidExecutor


class _Boundary:
    """The live boundary less its Ray-only checks (runtime env, entrypoint import)."""

    def validate(self, raw: dict[str, Any]) -> Accepted:
        return Accepted(parse_job_spec(raw, source="job"), {})


class _Executor(FluidExecutor):
    phases = RestartPhases()


def _job(name: str, workers: int, steps: float = 1_000.0) -> dict[str, Any]:
    return {
        "name": name,
        "total_steps": steps,
        "workers": workers,
        "throughput": {"v100": 1.0},
        "entrypoint": "lyra_ray.jobs.train_example:train_loop",
    }


def test_every_queued_job_carries_a_reason_from_inbox_to_queue(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    core = SchedulerCore(get_policy("fifo"), SpecThroughputs(), round_s=60.0)
    executor = _Executor([Node("v0", "v100", 2)], SpecThroughputs())
    serving = DemandReplay([])
    archive = JobArchive(store)
    live = LiveStore(store, Inbox(store, core), executor, serving, archive)
    desk = _desk(store, core, executor, live)
    raws = [_job("first", 2), _job("second", 1), _job("third", 1)]
    ids = desk.submit_all(raws)["job_ids"]
    for jid in ids:  # in the inbox: the scheduler has not taken them in yet
        row = desk.status(jid)
        assert row is not None
        assert row["reason_code"] == "submitted" and row["reason"]
    listed = {r["id"]: r for r in desk.list()}  # ``list`` shows them from the same moment
    assert sorted(listed) == sorted(ids)
    assert {r["status"] for r in listed.values()} == {"submitted"}
    assert [r["name"] for r in map(listed.get, ids)] == ["first", "second", "third"]

    for jid, raw in zip(ids, raws, strict=True):
        executor.register(jid, parse_job_spec(raw, source="job"))
    LiveCycle(core, live, executor, serving).run(_OneCycle())

    rows = {r["name"]: r for r in desk.list()}
    assert rows["first"]["status"] == "running" and "reason_code" not in rows["first"]
    for name in ("second", "third"):
        assert rows[name]["reason_code"] in CODES and rows[name]["reason"], rows[name]
    assert rows["second"]["reason_code"] == "capacity"


def _desk(store: StateStore, core: SchedulerCore, executor: _Executor, live: Any) -> JobDesk:
    """The desk as the actor wires it, over the loop's store (``live``) where there is one."""
    return JobDesk(
        core,
        store,
        Users(store),
        _Boundary(),  # type: ignore[arg-type]
        JobMeta(store),
        live.archive if live is not None else JobArchive(store),
        executor,  # type: ignore[arg-type]
        lambda: live.reasons if live is not None else {},
        threading.RLock(),
        threading.Event(),
    )


class _OneCycle:
    def __init__(self) -> None:
        self.done = False

    def next(self, wakeup: float | None) -> float | None:
        if self.done:
            return None
        self.done = True
        return 0.0


def test_one_refused_job_queues_none_of_its_batch(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    core = SchedulerCore(get_policy("fifo"), SpecThroughputs())
    desk = _desk(store, core, _Executor([], SpecThroughputs()), None)
    bad = {**_job("bad", 1), "total_steps": float("nan")}
    reply = desk.submit_all([_job("good", 1), bad])
    assert not reply["ok"] and "total_steps" in reply["error"]
    assert store.pending() == []
