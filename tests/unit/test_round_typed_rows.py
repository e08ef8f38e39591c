"""The round's single-job pass over prebuilt per-type rows picks what the general pass picks.

``round_greedy.greedy_singles`` ranks each GPU type's entries from rows built once per
reset (``rows_by_type``) instead of looking X and the deficit up at every round. Each
run here is compared, job by job, with one whose mechanism never builds those rows and so
takes the general pass (``greedy`` over the entry rows, as before the fast pass existed).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray import model as m
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.rounds import RoundMechanism
from lyra_ray.sim.simulator import Simulator
from tests.builders import job

GPU = ["v100", "p100", "k80"]


def _run(
    nodes: list[m.Node], specs: list[m.JobSpec], policy: str, typed: bool
) -> list[tuple[Any, ...]]:
    sim = Simulator(nodes, get_policy(policy), SpecThroughputs(), round_s=120.0)
    rounds = sim.core.rounds
    assert isinstance(rounds, RoundMechanism)
    if not typed:
        rounds._typed_rows = lambda rows: None  # type: ignore[method-assign,assignment,return-value]
    res = sim.run(specs)
    return [
        (r["id"], r["finish_s"], r["first_start_s"], r["preemptions"], r["steps_done"])
        for r in res.jobs
    ]


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(10, 3000), st.sampled_from([1, 1, 2, 4]), st.floats(0, 2000)),
        min_size=1,
        max_size=16,
    ),
    st.sampled_from(["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_perf"]),
)
def test_typed_rows_keep_the_schedule(jobs: list[tuple[float, int, float]], policy: str) -> None:
    nodes = [m.Node(f"{g}-{i}", g, 2) for g in GPU for i in range(2)]
    tput = {"v100": 3.0, "p100": 2.0, "k80": 1.0}
    specs = [
        job(f"j{i}", steps=s, workers=w, arrival=a, tput=tput) for i, (s, w, a) in enumerate(jobs)
    ]
    assert _run(nodes, specs, policy, True) == _run(nodes, specs, policy, False)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "finish_time_fairness", "fifo"])
def test_typed_rows_keep_a_crowded_schedule(policy: str) -> None:
    nodes = [m.Node("v100-0", "v100", 1), m.Node("k80-0", "k80", 2)]
    tput = {"v100": 2.0, "k80": 1.0}
    specs = [
        job(f"j{i}", 150.0 + 97.0 * i, workers=1 + i % 2, arrival=45.0 * i, tput=tput)
        for i in range(12)
    ]
    assert _run(nodes, specs, policy, True) == _run(nodes, specs, policy, False)
