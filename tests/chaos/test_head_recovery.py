"""The head node dies and comes back (issue #45, item 3): Ray's GCS fault tolerance with
an external Redis, lyra's state on a path outside the head.

cluster.yaml is played on this host (lyra_ray/ops/host_cluster.py) with fixed workers: the
head with its own head commands (``ray start --head ...``, ``lyra up --config ...``) and
``RAY_REDIS_ADDRESS`` naming a Redis of our own; a k80 training node and a t4 inference
node with the file's worker command. A dense service serves on the inference node; two
jobs train on the k80 node's two GPUs, a third waits behind them (FIFO, not preemptive).

Then the head dies: its ``gcs_server`` and ``raylet`` are SIGKILLed by PID, then every
other process of the head (dashboard, its actors: the scheduler, the run-control actor,
Serve's controller and proxy), as when the head machine is lost. The head's commands run
again (a new temp dir and home, as on a new machine; the same Redis and the same lyra
state path) and the test checks: the worker nodes rejoin with their ids; the scheduler
actor comes back and reloads its state (its restart count rises); the queued job is still
queued; the service answers again; the running jobs step again (going on, or resumed from
their checkpoints); every job ends with exactly its steps (its steps after the recovery
was seen run without pause: still every step once, in order, after the kill). The time
of each step after
the kill is recorded (``LYRA_CHAOS_OUT``, gathered by ``benchmarks/head_recovery.py`` into
``benchmarks/results/head_recovery.json`` and the table of docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.helpers import FULL, check_steps, record, size, step_lines
from tests.ray.live_helpers import job

pytestmark = [pytest.mark.ray, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
CKPT = 10


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("ray")
    from lyra_ray.ops.autoscaling_config import HostFit
    from lyra_ray.ops.host_cluster import start_host_cluster
    from lyra_ray.ops.redis import INSTALL_HINT, redis_binary

    if redis_binary() is None:
        if os.environ.get("LYRA_CI") == "1":
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    fit = HostFit(
        max_gpus_per_node=2,
        node_types=("k80", "t4-inference"),
        lyra={
            "policy": "fifo_nonpreemptive",
            "period_s": 0.5,
            "grace_s": 20.0,
            "autoscale": {"enabled": False},  # fixed workers: no autoscaler to ask
        },
    )
    hc = start_host_cluster(
        ROOT / "cluster.yaml",
        tmp_path_factory.mktemp("head"),
        fit,
        autoscaler=False,
        redis=True,
        auth_mode=os.environ.get("RAY_AUTH_MODE", "disabled"),
    )
    try:
        hc.start_worker("k80")
        hc.start_worker("t4-inference")
        yield hc
    finally:
        hc.down()


def _driver(hc: Any, phase: str, arg: Any) -> Any:
    token = hc.token_file()
    env = {**os.environ, "RAY_AUTH_MODE": hc.auth_mode, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    tok = token.read_text().strip() if token is not None else "-"
    cmd = [sys.executable, "-m", "tests.chaos.head_driver", phase, hc.address, tok]
    out = subprocess.run(
        [*cmd, json.dumps(arg)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    from tests.chaos.head_driver import MARK

    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(MARK)]
    assert lines, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(lines[-1][len(MARK) :])


def test_the_head_dies_and_comes_back_with_nothing_lost(host: Any, tmp_path: Path) -> None:
    hc = host
    total = size(80, 300)
    cfg = {"step_sleep_s": 0.25, "checkpoint_every": CKPT}
    logs = {n: tmp_path / f"{n}.log" for n in ("a", "b", "c")}
    # Paced in the short version: released once every running job stepped again after the
    # head came back (the driver's "after" phase), so the steps left (a third of the
    # test's time before) run without pause. The full campaign keeps the fixed pace, as
    # its recorded "all finished" time assumes.
    pace = None if FULL else tmp_path / "pace"
    jobs = [
        job(n, total, p, pace=pace, throughput={"k80": 1.0}, config=cfg) for n, p in logs.items()
    ]
    # a user's own Serve app (examples/dense: a real torch MLP), as any service is now
    service = {
        "name": "dense",
        "import_path": "dense_app:app",
        "args": {"hidden": 64, "layers": 2},
        "runtime_env": {"working_dir": str(ROOT / "examples" / "dense")},
        "deployments": [
            {"name": "DenseModel", "ray_actor_options": {"num_gpus": 1, "num_cpus": 0.25}},
            {"name": "Api", "ray_actor_options": {"num_cpus": 0.25}},
        ],
        "replicas_per_server": 1,
    }
    spec = {"service": service, "jobs": jobs, "past_steps": CKPT + 2, "pace": pace and str(pace)}
    state = _driver(hc, "before", spec)

    killed = hc.kill_head()
    t_kill = time.time()
    running = dict(zip(state["running"], map(Path, state["logs"]), strict=True))
    last = {j: step_lines(log)[-1] for j, log in running.items()}
    inc = hc.start_head()  # the same commands, the same Redis and state path
    t_head = time.time()
    after = _driver(hc, "after", state)

    # nothing lost: every job ends with exactly its steps
    for j in state["ids"]:
        row = after["final"][j]
        assert row["status"] == "finished" and row["steps_done"] == total, row
    outcome: dict[str, Any] = {}
    for j, log in running.items():
        gens = check_steps(log, total, slack=CKPT)
        gen, step = last[j]
        lines = step_lines(log)
        later = [s for g, s in lines if g > gen]  # runs started after the head died
        if later:
            # Resumed from a checkpoint the old run wrote: a periodic one (its actors
            # died), or the one it wrote when the newer run superseded it (its workers
            # outlived the head and stepped on until they saw the newer generation in
            # the control actor), exactly where it stopped. Seen in a whole run: last
            # step 19 at the kill, the old run stepped on to 35, the next began at 36.
            old_end = max(s for g, s in lines if g == gen) + 1
            assert later[0] % CKPT == 0 or later[0] == old_end, (step, old_end, later[0])
        outcome[j] = {
            "last_step_before_kill": step,
            "resumed_at_step": later[0] if later else None,
            "kept_running": not later,
            "steps_after_kill_in_old_run": sum(1 for g, s in lines if g == gen and s > step),
            "steps_repeated": gens["repeated"],
        }
    check_steps(logs["c"], total, slack=0)
    assert after["first_status"][state["queued"]] == "queued", after["first_status"]
    assert after["restarts"] >= 1, after  # the scheduler actor came back and reloaded

    def since(t: float) -> float:
        return round(t - t_kill, 1)

    figures = {
        "killed": sorted(killed),
        "steps": total,
        "checkpoint_every": CKPT,
        "head_ray_start_s": inc.commands_s[0],
        "head_commands_s": inc.started_s,
        "head_commands_done_s": since(t_head),
        "nodes_rejoined_s": since(after["nodes_back_at"]),
        "scheduler_back_s": since(after["scheduler_back_at"]),
        "service_answers_s": since(after["serve_back_at"]),
        "jobs_stepping_s": since(max(after["stepped_at"].values())),
        "all_finished_s": since(after["finished_at"]),
        "scheduler_restarts": after["restarts"],
        "queued_job_still_queued": True,
        "jobs": outcome,
    }
    record("head_recovery", figures)
    print(json.dumps(figures))
