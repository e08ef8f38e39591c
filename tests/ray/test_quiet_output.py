"""`lyra moe serve` prints lyra's lines only: Ray's and Serve's own logs stay in their
files unless `-v` asks for them (and then they are there, so the count can fail)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.ray.ray_noise import ray_log_lines

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]


def _moe_serve(*flags: str) -> str:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("LYRA_VERBOSE", None)
    out = subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", *flags, "moe", "serve", "--duration", "6"],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def test_moe_serve_prints_no_ray_log_lines_unless_verbose() -> None:
    quiet = _moe_serve()
    assert ray_log_lines(quiet) == [], quiet
    assert quiet.strip().splitlines()[-1].startswith("moe serve: done after"), quiet
    loud = _moe_serve("-v")
    assert len(ray_log_lines(loud)) >= 5, loud  # Serve's controller, replicas, ...
