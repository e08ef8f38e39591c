"""No solver banner on a user's terminal: HiGHS prints one when a process builds its
first instance, before any option can be set (it sat on top of every ``lyra simulate``
table). A fresh interpreter, as the banner appears once per process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SOLVE = """
from lyra_ray.model.throughput import catalogue_throughputs
from lyra_ray.policies.base import get_policy
from tests.gavel_builders import job, snapshot
jobs = [job(n, job_type=t) for n, t in (("a", "a3c"), ("b", "lm"))]
alloc = get_policy("max_min_fairness_packed").allocate(
    snapshot(jobs, {"v100": 1, "k80": 2}, catalogue_throughputs())
)
print("solved", len(alloc.fractions))
"""


def test_a_first_solve_prints_nothing_but_its_own_output() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SOLVE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("solved "), out.stdout
    assert "HiGHS" not in out.stderr, out.stderr
