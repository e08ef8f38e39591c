"""The live scheduler end to end on a real local cluster (FIFO, non-preemptive).

Jobs come in through the SDK and through ``ray job submit`` (a driver that runs
``lyra submit``), run as real Ray Train runs on fake GPUs and finish with exactly their
steps; bad input is refused at the boundary; the scheduler actor can be killed mid-run
and a node can be removed without losing or duplicating a job.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ray.conftest import LiveCluster
from tests.ray.live_helpers import (
    assert_every_step_once,
    assert_placements_match,
    job,
    step_counts,
    wait_until,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def client(live_cluster: LiveCluster) -> Iterator[Any]:
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client

    start_scheduler(
        {
            "policy": "fifo_nonpreemptive",
            "state_dir": str(live_cluster.workdir / "state"),
            "storage_path": str(live_cluster.workdir / "ckpt"),
            "period_s": 0.5,
            "grace_s": 20.0,
        }
    )
    yield Client(live_cluster.address)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"throughput": {"a100": 1.0}}, "throughput"),
    ({"min_workers": 3, "max_workers": 2}, "max_workers"),
    ({"entrypoint": None}, "entrypoint"),
    ({"entrypoint": "jobs.no_such_module:train_loop"}, "entrypoint"),
    ({"workers": 9}, "workers"),
    ({"total_steps": -5}, "total_steps"),
]


@pytest.mark.parametrize(("change", "field"), BAD)
def test_bad_input_is_refused_through_the_sdk(
    client: Any, tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    from lyra_ray.sdk import SpecError

    before = client.list()
    raw = job("bad", 10, tmp_path / "log")
    raw.update(change)
    raw = {k: v for k, v in raw.items() if v is not None}
    if "min_workers" in change:
        raw.pop("workers", None)
    with pytest.raises(SpecError, match=field):
        client.submit(raw)
    assert client.list() == before
    assert client.call("ping")["restarts"] == 0


def test_bad_input_is_refused_through_the_cli(
    client: Any, live_cluster: LiveCluster, tmp_path: Path
) -> None:
    before = client.list()
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("jobs:\n  - name: x\n    total_steps: [1,\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump({"jobs": [job("x", 10, tmp_path / "l", workers=99)]}))
    for path, needle in ((malformed, "malformed YAML"), (unknown, "'workers'")):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "lyra_ray.cli",
                "submit",
                str(path),
                "--address",
                live_cluster.address,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, out.stderr
        assert needle in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert client.list() == before


def test_sdk_and_ray_job_submit_jobs_finish_with_exact_steps(
    client: Any, live_cluster: LiveCluster, tmp_path: Path
) -> None:
    spec_file = tmp_path / "via_job.yaml"
    log_b = tmp_path / "b.log"
    spec_file.write_text(yaml.safe_dump({"jobs": [job("via-ray-job", 30, log_b, workers=1)]}))
    driver = subprocess.Popen(
        [
            RAY,
            "job",
            "submit",
            "--address",
            live_cluster.dashboard_url,
            "--",
            sys.executable,
            "-m",
            "lyra_ray.cli",
            "submit",
            str(spec_file),
            "--wait",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log_a = tmp_path / "a.log"
    a = client.submit(job("via-sdk", 40, log_a, workers=2))
    st = client.wait(a, timeout=300)
    out, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, out
    assert st["status"] == "finished" and st["steps_done"] == 40
    assert_every_step_once(log_a, 40)
    assert_every_step_once(log_b, 30)
    via_job = [j for j in client.list() if j["name"] == "via-ray-job"]
    assert len(via_job) == 1 and via_job[0]["status"] == "finished"
    assert via_job[0]["steps_done"] == 30
    assert assert_placements_match(client, a) == 2
    assert assert_placements_match(client, via_job[0]["id"]) == 1


def test_killing_the_scheduler_loses_no_job_and_runs_none_twice(
    client: Any, tmp_path: Path
) -> None:
    import ray

    from lyra_ray.sdk import SCHEDULER_ACTOR

    logs = {n: tmp_path / f"{n}.log" for n in ("k1", "k2")}
    ids = {n: client.submit(job(n, 60, logs[n], workers=1)) for n in logs}
    wait_until(
        lambda: all(logs[n].exists() and step_counts(logs[n]) for n in logs), 240, "both running"
    )
    ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace="lyra"), no_restart=False)
    late = client.submit(job("after-restart", 20, tmp_path / "late.log", workers=1))
    for jid in [*ids.values(), late]:
        st = client.wait(jid, timeout=300)
        assert st["status"] == "finished", st
    assert client.call("ping")["restarts"] >= 1
    launches = [jid for _t, jid, _g, _a in client.call("launches")]
    for n, jid in ids.items():
        assert launches.count(jid) == 1, f"{n} launched {launches.count(jid)} times"
        assert_every_step_once(logs[n], 60)


def test_removing_a_node_resumes_its_jobs_elsewhere(
    client: Any, live_cluster: LiveCluster, tmp_path: Path
) -> None:
    log = tmp_path / "moved.log"
    jid = client.submit(
        job(
            "moved",
            80,
            log,
            workers=2,
            throughput={"k80": 1.0, "p100": 0.5},
            config={"step_sleep_s": 0.1},
        )
    )
    wait_until(lambda: log.exists() and len(step_counts(log)) >= 15, 240, "progress")
    first = client.status(jid)["assignment"]
    assert first["gpu_type"] == "k80"
    live_cluster.remove(first["nodes"][0][0])
    st = client.wait(jid, timeout=300)
    assert st["status"] == "finished" and st["steps_done"] == 80
    runs = [a for _t, j, _g, a in client.call("launches") if j == jid]
    assert len(runs) == 2 and runs[1]["gpu_type"] == "p100"
    assert_every_step_once(log, 80, slack=10)
    assert_placements_match(client, jid)


def test_a_failed_tests_report_can_read_the_schedulers_log(client: Any) -> None:
    """What ``tests/conftest.py`` adds to a failed live test's report is found on a real
    cluster: the scheduler actor's ``.err`` file, by Ray's actor mark, holding the line the
    actor logs at start (a diagnostic that found nothing would stay silent)."""
    from ray._private import worker

    from tests.actor_logs import actor_log_tails

    client.call("ping")  # the actor is up (restarted by the kill test above, if it ran)
    tail = actor_log_tails(Path(worker._global_node.get_logs_dir_path()), "GlobalScheduler")
    assert "scheduling: policy fifo_nonpreemptive" in tail, tail[-2000:]


def test_a_working_dir_set_up_on_another_node_leaves_a_running_process_its_own(
    live_cluster: LiveCluster, tmp_path: Path
) -> None:
    """The embedded cluster's nodes keep their runtime envs apart, as hosts would.

    WHY: the nodes of a one-host cluster share the session directory, and Ray unpacks a
    ``working_dir`` into ``<session>/runtime_resources`` anew on each node that first
    needs it, over the copy already there: a process on one node running in that
    directory lost it (its cwd deleted) when another node set the same package up (a
    probe's actor on the head then died importing PyTorch, "Intel oneMKL FATAL ERROR:
    Cannot load libtorch_cpu.so", once a Serve copy with its working_dir started on a
    server). Each node now has a runtime-env directory of its own
    (``EmbeddedCluster.add_gpu_node``). Here: an actor on one node reads a file of its
    working_dir before and after a task on another node sets the same working_dir up
    (``tests/ray/working_dir_probe.py``); without the fix the second read fails
    (FileNotFoundError)."""
    import ray

    from tests.ray.working_dir_probe import TEXT, reads_across_nodes

    here, there = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")][:2]
    assert reads_across_nodes(tmp_path / "team", here, there) == [TEXT] * 3
