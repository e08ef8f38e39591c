"""The README's live-cluster block works for a newcomer, word for word.

Each command of the block runs as written, in a shell whose ``PATH`` does not contain the
project's virtualenv (a newcomer who never activated it) and whose ``HOME`` is fresh (no
token, no ``~/.lyra`` yet). The ``export`` line is what its comment says: the two lines
``lyra up`` printed. Every job finishes, the lyra commands print none of Ray's or Serve's
own log lines, each ends with a line saying what happened, and ``lyra down`` stops the
cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.ray.ray_noise import ray_log_lines

pytestmark = [pytest.mark.ray, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"


def readme_block(heading: str = "## A live cluster") -> list[str]:
    """The commands of the first ``bash`` block under ``heading``, comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading) :]
    start = section.index("```bash") + len("```bash")
    body = section[start : section.index("```", start)]
    lines = [ln.split("  #")[0].strip() for ln in body.strip().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _run(cmd: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_readme_live_cluster_block_runs_as_written() -> None:
    commands = readme_block()
    assert commands[0].startswith(".venv/bin/lyra up") and commands[-1] == ".venv/bin/lyra down"
    assert any(c.startswith(".venv/bin/ray job submit") for c in commands)
    home = Path(tempfile.mkdtemp(prefix="lyra-readme-"))
    env = {
        "HOME": str(home),
        "PATH": BARE_PATH,
        "RAY_TMPDIR": str(home / "ray"),  # short: Ray's socket paths must fit
        "RAY_USAGE_STATS_ENABLED": "0",
        "LANG": "C.UTF-8",
        "COLUMNS": "80",
    }
    assert shutil.which("lyra", path=BARE_PATH) is None  # the venv is not on this PATH
    outputs: dict[str, str] = {}
    try:
        for cmd in commands:
            if cmd.startswith("export "):
                # "the two lines `lyra up` prints"
                for line in outputs[commands[0]].splitlines():
                    if line.startswith("export "):
                        key, value = line.removeprefix("export ").split("=", 1)
                        env[key] = value
                assert "RAY_ADDRESS" in env and env.get("RAY_AUTH_MODE") == "token"
                continue
            out = _run(cmd, env)
            text = out.stdout + out.stderr
            outputs[cmd] = text
            assert out.returncode == 0, f"{cmd}\n{text}"
            if ".venv/bin/lyra" in cmd:  # Ray's own CLI (`ray job submit`) may log
                assert ray_log_lines(text) == [], f"{cmd}: Ray log lines\n{text}"
                assert text.strip().splitlines()[-1].strip(), cmd
    finally:
        if (home / ".lyra" / "up.json").exists():
            _run(".venv/bin/lyra down", env, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    up = outputs[commands[0]]
    assert up.strip().splitlines()[-1].startswith("cluster up at "), up
    submit = next(t for c, t in outputs.items() if c.startswith(".venv/bin/lyra submit"))
    assert submit.strip().splitlines()[-1] == "2 of 2 job(s) finished", submit
    # tiny-a's table names p100, which this cluster lacks: accepted, and the user is told
    assert "tiny-a names GPU types this cluster lacks, ignored: ['p100']" in submit, submit
    via_ray = next(t for c, t in outputs.items() if c.startswith(".venv/bin/ray job submit"))
    assert "2 of 2 job(s) finished" in via_ray and "succeeded" in via_ray, via_ray
    status = outputs[".venv/bin/lyra status"]
    assert status.strip().splitlines()[-1] == "4 job(s): 4 finished", status
    for line in status.splitlines():  # ids are never cut
        assert "…" not in line, status
    assert outputs[".venv/bin/lyra down"].startswith("cluster down: stopped"), outputs
    assert os.environ.get("PATH") != BARE_PATH  # the test's own process kept its PATH
