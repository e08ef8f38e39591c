"""Fidelity to Gavel's own simulator: average JCT within 5 % of Gavel's numbers.

Gavel's simulator gives 19,989 s (``max_min_fairness``) and 14,623 s
(``max_min_fairness_perf``) on ``max_min_fairness.trace`` with v100=8, p100=16, k80=24
and 360 s rounds (the issue's acceptance numbers). Runs the real core + simulator.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lyra_ray.model.spec import parse_cluster
from lyra_ray.model.throughput import load_gavel_throughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.sim.simulator import Simulator
from lyra_ray.sim.traces import read_gavel_trace

SHARED = Path(
    os.environ.get(
        "LYRA_SHARED_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    )
)
GAVEL = SHARED / "gavel"

pytestmark = pytest.mark.data


@pytest.mark.parametrize(
    ("policy", "gavel_avg_jct_s"),
    [("max_min_fairness", 19989.0), ("max_min_fairness_perf", 14623.0)],
)
def test_average_jct_within_five_percent_of_gavel(policy: str, gavel_avg_jct_s: float) -> None:
    trace = GAVEL / "traces" / "max_min_fairness.trace"
    if not trace.exists():
        pytest.skip(f"{trace} not found")
    model = load_gavel_throughputs(GAVEL / "simulation_throughputs.json")
    specs = read_gavel_trace(trace, known_job_types=model.job_types)
    nodes = parse_cluster("v100=8,p100=16,k80=24", 1)
    result = Simulator(nodes, get_policy(policy), model, round_s=360.0).run(specs)
    assert result.summary["completed_jobs"] == len(specs)
    ours = result.summary["avg_jct_s"]
    assert abs(ours / gavel_avg_jct_s - 1) <= 0.05, (policy, ours, gavel_avg_jct_s)
