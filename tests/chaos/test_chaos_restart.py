"""The whole cluster restarts (issues #17, item 4, and #42, item 1): ``lyra down``, then
``lyra up`` with the same ``--dir``, and nothing is lost.

``lyra up --local --dir D`` keeps the scheduler's state in ``D/state`` and the
checkpoints in ``D/checkpoints``; ``lyra down --dir D`` ends the cluster's processes and
leaves both. A later ``lyra up --dir D`` starts a scheduler that reloads the state, here
with another policy and another set of nodes, as a user may: the old cluster's nodes are
forgotten (a new cluster has new node ids), the running job resumes from its newest
checkpoint on the new nodes and finishes with exactly its steps, the job that was queued
is still there and runs, and the job that had finished is still reported (archive). The
old policy's own saved state (FIFO's kept GPU types) is dropped, with one line; it used
to stop the new scheduler from starting at all, and a later "fix" deleted ``D/state`` and
``D/checkpoints`` on every ``lyra up --local``, which lost every job.

While the second cluster is up, its nodes are checked to keep their runtime envs apart,
as hosts do (``tests/ray/working_dir_probe.py``): ``lyra up --local`` gives each worker
node a temp dir of its own, since with the head's every node shared one runtime-env
directory, and a node setting a ``working_dir`` up unpacked it over the copy another
node's processes ran in. It is here because this is the one test that starts ``lyra up
--local`` with more than one node; a cluster of its own would cost another start.

In ``make test`` (~1.5 min: two cluster starts and stops, three run starts; the long
job runs its steps after the restart without pause, ``release``); the full campaign runs
the long job longer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.helpers import check_steps, lyra_cli, record, size, step_lines
from tests.ray.live_helpers import job, release
from tests.ray.working_dir_probe import TEXT

pytestmark = [pytest.mark.ray, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
CKPT = 10


_lyra = lyra_cli


def _driver(phase: str, home: Path, arg: Any, env: dict[str, str]) -> Any:
    """The SDK side in its own process (see ``restart_driver.py``): its last line."""
    address = json.loads((home / "up.json").read_text())["address"]
    cmd = [sys.executable, "-m", "tests.chaos.restart_driver", phase, address, json.dumps(arg)]
    env = {**env, "LYRA_HOME": str(home)}  # the admin token `lyra up` wrote there
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_down_then_up_with_the_same_dir_resumes_every_job(tmp_path: Path) -> None:
    home = tmp_path / "lyra"
    env = {
        **os.environ,
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
        "RAY_TMPDIR": f"/tmp/lyra-chaos-up-{os.getuid()}",
        "PYTHONPATH": str(ROOT),
    }
    first = ["up", "--local", "--nodes", "k80=1x2", "--dir", str(home)]
    # the second cluster: another node (of 3 GPUs) and another policy, whose own state
    # the saved one is not
    second = ["up", "--local", "--nodes", "k80=1x3", "--dir", str(home), "--policy", "lyra"]
    # Long enough to outlive `lyra down`: its workers train on until their node stops
    # (at most 5 steps a second, ~10 s of `lyra down`).
    total = size(200, 500)
    logs = {n: tmp_path / f"{n}.log" for n in ("short", "long", "queued")}
    cfg = {"step_sleep_s": 0.2, "checkpoint_every": CKPT}
    pace = tmp_path / "pace"  # released once the second cluster is up: the resumed run
    # has nothing left to outlive, and its remaining steps need no pause
    jobs = [
        job("short", 20, logs["short"], workers=1, throughput={"k80": 1.0}),
        job("long", total, logs["long"], pace, workers=1, throughput={"k80": 1.0}, config=cfg),
        # both GPUs: it waits behind the long job (FIFO, no preemption) until the restart
        job("queued", 20, logs["queued"], workers=2, throughput={"k80": 1.0}),
    ]
    t0 = time.monotonic()
    _lyra(*first, "--policy", "fifo_nonpreemptive", env=env)
    try:
        before = _driver("before", home, {"jobs": jobs, "min_steps": 35}, env)
    finally:
        d0 = time.monotonic()
        _lyra("down", "--dir", str(home), env=env)
        down_s = time.monotonic() - d0
    short, long, queued = before["ids"]
    assert before["statuses"] == ["finished", "running", "queued"], before
    last = max(s for _, s in step_lines(logs["long"]))
    assert (home / "state" / "lyra.sqlite").exists() and not (home / "up.json").exists()
    u0 = time.monotonic()
    out = _lyra(*second, env=env)
    up_s = time.monotonic() - u0
    resumed_line = next(ln for ln in out.splitlines() if ln.startswith("resuming from"))
    assert "1 queued, 1 running" in resumed_line and "1 ended" in resumed_line, resumed_line
    assert "policy changed from fifo_nonpreemptive to lyra" in resumed_line, resumed_line
    release(pace)
    try:
        after = _driver(
            "after", home, {"ids": [short, long, queued], "old_nodes": before["nodes"]}, env
        )
        apart = _driver("apart", home, {"folder": str(tmp_path / "team")}, env)
    finally:
        _lyra("down", "--dir", str(home), env=env)
    assert len(after["nodes"]) == 1 and not set(after["nodes"]) & set(before["nodes"]), after
    assert after["restored"]["policy_dropped"] == "fifo_nonpreemptive", after["restored"]
    assert apart["reads"] == [TEXT] * 3, apart
    st, done, waited = (after["status"][j] for j in (long, short, queued))
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert done["status"] == "finished" and done["steps_done"] == 20, done  # from the archive
    assert waited["status"] == "finished" and waited["steps_done"] == 20, waited
    gens = check_steps(logs["long"], total, slack=CKPT)
    assert gens["generations"] == 2, gens  # the run stopped with the cluster, resumed after
    resumed = min(s for g, s in step_lines(logs["long"]) if g == 2)
    assert resumed % CKPT == 0 and last + 1 - CKPT <= resumed <= last + 1, (last, resumed)
    check_steps(logs["queued"], 20, slack=0)
    assert len({g for g, _ in step_lines(logs["queued"])}) == 1  # one run: after the restart
    record(
        "cluster_restart",
        {
            "steps": total,
            "last_step_before_down": last,
            "resumed_at_step": resumed,
            "steps_lost": last + 1 - resumed,
            "checkpoint_every": CKPT,
            "generations": gens["generations"],
            "finished_job_still_reported": True,
            "queued_job_ran_after_restart": True,
            "policy_changed": "fifo_nonpreemptive -> lyra",
            "nodes_changed": "k80=1x2 -> k80=1x3",
            "scheduler_restarts_counted": after["restarts"],
            "down_s": round(down_s, 1),
            "up_again_s": round(up_s, 1),
            "wall_s": round(time.monotonic() - t0, 1),
        },
    )
