"""Ending a process group (``ops/process_groups.py``), the one way ``lyra down``, a host
cluster's nodes and Prometheus are ended: real processes, no Ray. A group counts as
ended only when ``/proc`` shows none of its processes alive, so a leader that is our
own unreaped child (a zombie) does not keep it "alive", and a process that ignores
SIGTERM is killed once the grace has passed."""

from __future__ import annotations

import subprocess
import sys

from lyra_ray.ops.process_groups import descendants, end_groups, members

IGNORES_TERM = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
    "print('ready', flush=True)\n"
    "time.sleep(300)\n"
)


def _group(code: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = _group(IGNORES_TERM)
    assert len(members(proc.pid)) == 2 and len(descendants(proc.pid)) == 1
    end_groups([proc.pid], grace_s=0.5)
    assert members(proc.pid) == []
    proc.wait(timeout=5)  # reaped (end_groups reaps its own children's leaders)


def test_a_group_that_obeys_sigterm_ends_and_a_zero_grace_kills_at_once() -> None:
    obeys = _group("import time\nprint('ready', flush=True)\ntime.sleep(300)\n")
    end_groups([obeys.pid], grace_s=30.0)
    assert members(obeys.pid) == []
    killed = _group(IGNORES_TERM)
    end_groups([killed.pid, 0, -1], grace_s=0.0)  # no real group below 1: skipped
    assert members(killed.pid) == []
