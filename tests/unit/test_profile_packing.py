"""A profiled table decides packing (#28): a pair whose measured shares sum above 1 is
packed by a packed policy, a pair whose shares sum below 1 is kept apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray.model import split_pair
from lyra_ray.model.throughput import load_gavel_throughputs
from lyra_ray.policies.base import get_policy
from tests.gavel_builders import job as view
from tests.gavel_builders import snapshot


def _profiled(tmp_path: Path) -> Path:
    """As ``lyra profile run`` writes it: x and y keep 0.7 each beside the other (1.4 of
    a GPU's work), u and w keep 0.4 each (0.8: worse than taking turns)."""
    rows = {
        "('x', 1)": {"null": 10.0, "('y', 1)": [7.0, 14.0]},
        "('y', 1)": {"null": 20.0, "('x', 1)": [14.0, 7.0]},
        "('u', 1)": {"null": 5.0, "('w', 1)": [2.0, 1.2]},
        "('w', 1)": {"null": 3.0, "('u', 1)": [1.2, 2.0]},
    }
    f = tmp_path / "profile.json"
    f.write_text(json.dumps({"v100": rows, "predicted": [], "provenance": {"source": "test"}}))
    return f


@pytest.mark.parametrize("policy", ["max_min_fairness_packed", "finish_time_fairness_packed"])
def test_a_packed_policy_pairs_what_gains_and_keeps_apart_what_loses(
    tmp_path: Path, policy: str
) -> None:
    model = load_gavel_throughputs(_profiled(tmp_path))

    def paired(a: str, b: str) -> float:
        jobs = [view(n, job_type=n, total_steps=1000.0) for n in (a, b)]
        fr = get_policy(policy).allocate(snapshot(jobs, {"v100": 1}, model)).fractions
        return sum(sum(r.values()) for k, r in fr.items() if len(split_pair(k)) == 2)

    assert paired("x", "y") == pytest.approx(1.0, abs=1e-4)
    assert paired("u", "w") == pytest.approx(0.0, abs=1e-4)
