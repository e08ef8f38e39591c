"""How a run that ended badly is told apart and retried (issue #17, item 3).

A Train worker process that dies is a crash: the run restarts from its checkpoint, up
to the scheduler's retry limit, and then the job fails with a reason that says what
happened and how often. The job's own code raising fails it at once (a rerun would
raise again). Ray's own exception types, no cluster: the messages are Ray 2.60's.
"""

from __future__ import annotations

from typing import Any

import pytest
from ray.train.v2._internal.exceptions import (
    UserExceptionWithTraceback,
    WorkerHealthCheckFailedError,
)
from ray.train.v2.api.exceptions import ControllerError, WorkerGroupError

from lyra_ray import model as m
from lyra_ray.runtime import ray_runtime, reconcile, runs
from lyra_ray.runtime.ray_runtime import RayRuntime
from lyra_ray.runtime.run_record import RunRecord

DIED = (
    "The actor died unexpectedly before finishing this task.\n\tclass_name: RayTrainWorker\n"
    "\tpid: 8748\nThe actor is dead because its worker process has died. Worker exit type: "
    "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2."
)


def test_a_dead_worker_process_is_a_crash_named_with_its_pid() -> None:
    e = WorkerGroupError(
        "...", {0: WorkerHealthCheckFailedError("A worker health check failed.", Exception(DIED))}
    )
    outcome, reason = runs.failure(e)
    assert outcome == "crashed"
    assert reason == "Train worker process died (rank 0, pid 8748, exit type SYSTEM_ERROR)"


@pytest.mark.parametrize("wrapped", [False, True])
def test_the_jobs_own_exception_is_a_failure_naming_it(wrapped: bool) -> None:
    """Ray hands the user's exception over unwrapped (``WorkerGroupPollStatus.errors``);
    a wrapped one is read the same way."""
    err: Exception = ValueError("boom at 12")
    if wrapped:
        err = UserExceptionWithTraceback(err, "Traceback...\nValueError: boom at 12\n")
    outcome, reason = runs.failure(WorkerGroupError("...", {0: err}))
    assert outcome == "failed"
    assert reason == "the job's code raised on worker rank 0: ValueError: boom at 12"


def test_anything_else_from_ray_is_a_crash() -> None:
    outcome, reason = runs.failure(ControllerError(RuntimeError("controller went away")))
    assert outcome == "crashed" and "ControllerError" in reason and "\n" not in reason


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> RayRuntime:
    """A RayRuntime with Ray's side effects recorded instead of made."""
    started: list[tuple[str, int]] = []
    monkeypatch.setattr(
        runs, "start_run", lambda req, *_: started.append((req.job_id, req.generation))
    )
    monkeypatch.setattr(runs, "kill_run", lambda job, gen, *_: True)
    monkeypatch.setattr(runs, "end_job", lambda job: None)
    monkeypatch.setattr(runs, "release", lambda job: None)
    # A stop request too: unrecorded, it created the control actor through Ray's
    # auto-init, and `make test-unit` once hung there (2026-12-02: the test process
    # waiting in Ray's Node._init_gcs_client for a GCS, with none started).
    monkeypatch.setattr(runs, "request_stop", lambda job, gen, keep=None: None)
    monkeypatch.setattr(ray_runtime, "get_or_create_control", lambda: None)
    spec = m.JobSpec(name="j", total_steps=100.0, entrypoint="a:b", throughput={"k80": 1.0})
    rt = RayRuntime(lambda _j: spec, "/tmp/lyra-unused", max_restarts=2)
    rt.inventory.nodes = {"n1": m.Node("n1", "k80", 2)}
    rt.inventory.gpu_label = {"n1": "k80"}
    rt.started = started  # type: ignore[attr-defined]
    return rt


def _run(rt: RayRuntime) -> RunRecord:
    a = {"gpu_type": "k80", "workers": 1, "nodes": [["n1", 1]], "partner": None}
    rt.start("j", a)
    return rt.runs["j"]


def test_a_crash_restarts_until_the_limit_then_the_job_fails_saying_why(
    runtime: RayRuntime,
) -> None:
    events: list[Any] = []
    r = _run(runtime)
    for _ in range(2):  # two restarts from the checkpoint are allowed
        events = runtime._ended(r, "crashed", 30.0, "Train worker process died (rank 0)")
        assert events == [m.JobProgress("j", 30.0)]
        r = runtime.runs["j"]
    assert [g for _j, g in runtime.started] == [1, 2, 3]  # type: ignore[attr-defined]
    (failed,) = runtime._ended(r, "crashed", 40.0, "Train worker process died (rank 0)")
    assert isinstance(failed, m.JobFailed)
    assert failed.reason == (
        "run crashed 3 times, retry limit 2 restarts from checkpoint; "
        "last: Train worker process died (rank 0)"
    )


def test_the_jobs_own_error_fails_it_without_a_restart(runtime: RayRuntime) -> None:
    r = _run(runtime)
    (failed,) = runtime._ended(r, "failed", 12.0, "the job's code raised: ValueError")
    assert failed == m.JobFailed("j", "the job's code raised: ValueError")
    assert len(runtime.started) == 1  # type: ignore[attr-defined]


def test_a_run_ending_where_the_raylet_is_gone_takes_its_node_down_at_once(
    runtime: RayRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that ends on a node whose raylet refuses connections is neither restarted
    there nor failed ("failed" is what a worker's collective call raising looks like):
    its node leaves the view, and the next poll reports its NodeDown (once, though a
    second run there ends too), which re-queues the job without waiting for Ray's
    health checks."""
    monkeypatch.setattr(runtime.inventory, "raylet_gone", lambda node, timeout_s=1.0: True)
    monkeypatch.setattr(runtime.inventory, "read", lambda: {})
    r = _run(runtime)
    assert runtime._ended(r, "failed", 12.0, "collective op failed: peer gone") == []
    assert "j" not in runtime.runs and "n1" not in runtime.inventory.nodes
    assert len(runtime.started) == 1  # type: ignore[attr-defined]  # no restart in place
    r2 = _run(runtime)  # a second run placed there before the news (another job's)
    assert runtime._ended(r2, "crashed", 3.0, "worker died") == []
    assert runtime._pending == [m.NodeDown("n1")]


def test_reconcile_adopts_a_run_started_after_the_last_commit(
    runtime: RayRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler died between applying a Launch and committing its runs table: the
    control actor knows generation 1, the restored table does not. Reconcile adopts it;
    starting generation 1 again would run it twice (the fault hook's ``after_apply``)."""
    killed: list[tuple[str, int]] = []
    monkeypatch.setattr(runs, "kill_run", lambda job, gen, *_: killed.append((job, gen)) or True)
    a = m.Assignment("k80", 1, (("n1", 1),))
    records = {
        "j": {"generation": 1, "steps": 7.0, "outcome": None},
        "gone": {"generation": 3, "steps": 0.0, "outcome": None},  # not wanted any more
    }
    runtime.runs["gone"] = RunRecord("gone", 2, {"nodes": [["n1", 1]]}, 0.0)
    runtime.trail.take("gone", 2)
    reconcile.adopt_unrecorded(runtime, {"j": a}, records)
    assert runtime.runs["j"].generation == 1 and runtime.generation("j") == 1
    assert [(j, g) for _t, j, g, _a in runtime.trail.launches] == [("j", 1)]
    assert runtime.started == []  # type: ignore[attr-defined]
    assert "gone" not in runtime.runs and runtime.generation("gone") == 3
    assert ("gone", 3) in killed and ("gone", 2) in killed
    runtime.start("j", runtime.runs["j"].assignment)  # a later start takes the next number
    assert runtime.started == [("j", 2)]  # type: ignore[attr-defined]


def test_a_resize_whose_scheduler_died_mid_way_is_still_recorded(runtime: RayRuntime) -> None:
    """The scheduler is killed after asking a run to stop for a resize (#47, found by
    the chaos test's kill mid-resize): the one that restarts from its state starts the
    next generation, and the resize's phase record closes at that run's first step
    (the restarted scheduler never asked for the stop itself, so it used to leave the
    record open for good)."""
    a1 = {"gpu_type": "k80", "workers": 2, "nodes": [["n1", 2]], "partner": None}
    a2 = {"gpu_type": "k80", "workers": 1, "nodes": [["n1", 1]], "partner": None}
    runtime.start("j", a1)
    runtime.decided_at = 99.0
    runtime.stop("j", next_assignment=a2)
    restarted = RayRuntime(runtime.specs, "/tmp/lyra-unused", max_restarts=2)
    restarted.inventory.nodes = dict(runtime.inventory.nodes)
    restarted.inventory.gpu_label = dict(runtime.inventory.gpu_label)
    restarted.load_state(runtime.to_state())
    assert restarted.trail.stop_requested_at == runtime.trail.stop_requested_at
    r = restarted.runs["j"]
    events = restarted._ended(r, "stopped", 30.0, "", {"stop_seen": 100.0, "finished_at": 101.0})
    assert events == [m.JobProgress("j", 30.0)] and restarted.runs["j"].generation == 2
    restarted.phases.observe("j", 2, {"workers_up": 102.0, "first_step": 103.0})
    (rec,) = restarted.phases.take_fresh()
    assert (rec["from_workers"], rec["to_workers"], rec["at"]) == (2, 1, 99.0)
    assert set(rec["phases"]) == {
        "stop_signal_s", "checkpoint_s", "relaunch_s", "workers_up_s", "first_step_s"
    }  # fmt: skip
