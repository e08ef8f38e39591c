"""Registering every policy imports neither HiGHS nor SciPy: they load at first use.

WHY: every policy module is imported at start to register its name, and a replay under a
policy that solves with ECOS or none at all (LAS, FIFO, the baselines) would otherwise pay
``highspy`` (~15 ms) and ``scipy.sparse`` (~0.1 s) at every ``lyra simulate`` start,
which is part of the time ``benchmarks/sim_speed.py`` compares with Gavel's.
"""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
from lyra_ray.policies.base import available_policies
names = available_policies()
assert "max_min_fairness_perf" in names and "finish_time_fairness_perf" in names, names
print(",".join(sorted(m for m in ("highspy", "scipy", "scipy.sparse") if m in sys.modules)))
"""


def test_registering_the_policies_loads_neither_highs_nor_scipy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == ""


def test_a_highs_solve_imports_highs_on_first_use() -> None:
    from lyra_ray.policies.gavel.inputs import build_problem
    from lyra_ray.policies.gavel.max_min_fairness import solve_las
    from tests.gavel_builders import random_snapshot

    p = build_problem(random_snapshot(8, seed=5))
    X, level = solve_las(p, agnostic=False, method="ipm-interior")
    assert level > 0 and X.shape == (p.n, p.k)
    assert "highspy" in sys.modules
    assert X.sum(axis=1).max() <= 1.0 + 1e-6
