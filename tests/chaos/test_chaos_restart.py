"""The whole cluster restarts (issue #17, item 4): ``lyra down``, then ``lyra up`` with the
same ``--dir``, and the unfinished jobs resume from their checkpoints.

``lyra up --local --dir D`` keeps the scheduler's state in ``D/state`` and the
checkpoints in ``D/checkpoints``; ``lyra down --dir D`` ends the cluster's processes and
leaves both. A later ``lyra up --dir D`` therefore starts a scheduler that reloads the
state: its jobs' old nodes are gone (a new cluster has new node ids), so they are
re-queued and launched on the new nodes from their newest checkpoints. A job that had
finished is still reported, from the archive.
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

from tests.chaos.helpers import FULL, check_steps, record, size, step_lines
from tests.ray.live_helpers import job

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(1200),
    # ~3.5 minutes here (two `lyra up`, two `lyra down` of ~30 s each, two run starts):
    # the full campaign runs it, `make test` keeps its budget for the other scenarios.
    pytest.mark.skipif(not FULL, reason="whole-cluster restart: LYRA_CHAOS=full only"),
]

ROOT = Path(__file__).resolve().parents[2]
CKPT = 10


def _lyra(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"lyra {' '.join(args)}: {out.stdout[-2000:]}{out.stderr[-3000:]}"
    return out.stdout


def _driver(phase: str, home: Path, arg: Any, env: dict[str, str]) -> Any:
    """The SDK side in its own process (see ``restart_driver.py``): its last line."""
    address = json.loads((home / "up.json").read_text())["address"]
    cmd = [sys.executable, "-m", "tests.chaos.restart_driver", phase, address, json.dumps(arg)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_down_then_up_with_the_same_dir_resumes_unfinished_jobs(tmp_path: Path) -> None:
    home = tmp_path / "lyra"
    env = {
        **os.environ,
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
        "RAY_TMPDIR": f"/tmp/lyra-chaos-up-{os.getuid()}",
        "PYTHONPATH": str(ROOT),
    }
    up = ["up", "--local", "--nodes", "k80=1x2", "--dir", str(home), "--policy"]
    up += ["fifo_nonpreemptive"]
    # Long enough to outlive `lyra down`: its workers train on until their node stops.
    total = size(300, 500)
    logs = {n: tmp_path / f"{n}.log" for n in ("short", "long")}
    cfg = {"step_sleep_s": 0.2, "checkpoint_every": CKPT}
    jobs = [
        job("short", 20, logs["short"], workers=1, throughput={"k80": 1.0}),
        job("long", total, logs["long"], workers=1, throughput={"k80": 1.0}, config=cfg),
    ]
    t0 = time.monotonic()
    _lyra(*up, env=env)
    try:
        short, long = _driver("before", home, {"jobs": jobs, "min_steps": 35}, env)
    finally:
        d0 = time.monotonic()
        _lyra("down", "--dir", str(home), env=env)
        down_s = time.monotonic() - d0
    before = max(s for _, s in step_lines(logs["long"]))
    assert (home / "state" / "lyra.sqlite").exists() and not (home / "up.json").exists()
    _lyra(*up, env=env)
    try:
        after = _driver("after", home, [short, long], env)
    finally:
        _lyra("down", "--dir", str(home), env=env)
    st, done = after["status"][long], after["status"][short]
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert done["status"] == "finished" and done["steps_done"] == 20, done  # from the archive
    gens = check_steps(logs["long"], total, slack=CKPT)
    assert gens["generations"] == 2, gens  # the run stopped with the cluster, resumed after
    resumed = min(s for g, s in step_lines(logs["long"]) if g == 2)
    assert resumed % CKPT == 0 and before + 1 - CKPT <= resumed <= before + 1, (before, resumed)
    record(
        "cluster_restart",
        {
            "steps": total,
            "last_step_before_down": before,
            "resumed_at_step": resumed,
            "steps_lost": before + 1 - resumed,
            "checkpoint_every": CKPT,
            "generations": gens["generations"],
            "finished_job_still_reported": True,
            "scheduler_restarts_counted": after["restarts"],
            "down_s": round(down_s, 1),
            "wall_s": round(time.monotonic() - t0, 1),
        },
    )
