"""The round mechanism's memo changes nothing: the same schedule, exactly.

Its entries (entry rows, GPU-type order, throughput rows, runnable types, pair keys,
GPU counts) are reused across rounds while what they were built from is unchanged.
Each run here is compared with one that clears the whole memo before every round.
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
from tests.builders import job, schedule

GPU = ["v100", "p100", "k80"]


def _run(
    nodes: list[m.Node], specs: list[m.JobSpec], policy: str, cached: bool
) -> list[tuple[Any, ...]]:
    sim = Simulator(nodes, get_policy(policy), SpecThroughputs(), round_s=120.0)
    rounds = sim.core.rounds
    assert isinstance(rounds, RoundMechanism)
    if not cached:
        assign = rounds.assign

        def fresh(*args: Any, **kw: Any) -> dict[m.JobId, m.Assignment]:
            rounds.memo.clear()
            return assign(*args, **kw)

        rounds.assign = fresh  # type: ignore[method-assign]
    res = sim.run(specs)
    return schedule(res.jobs)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(10, 3000), st.sampled_from([1, 1, 2]), st.floats(0, 2000)),
        min_size=1,
        max_size=14,
    ),
    st.sampled_from(["max_min_fairness_perf", "max_min_fairness", "fifo"]),
)
def test_round_caches_keep_the_schedule(jobs: list[tuple[float, int, float]], policy: str) -> None:
    nodes = [m.Node(f"{g}-{i}", g, 2) for g in GPU for i in range(2)]
    tput = {"v100": 3.0, "p100": 2.0, "k80": 1.0}
    specs = [
        job(f"j{i}", steps=s, workers=w, arrival=a, tput=tput) for i, (s, w, a) in enumerate(jobs)
    ]
    assert _run(nodes, specs, policy, True) == _run(nodes, specs, policy, False)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness"])
def test_round_caches_keep_a_crowded_schedule(policy: str) -> None:
    nodes = [m.Node("v100-0", "v100", 1), m.Node("k80-0", "k80", 2)]
    tput = {"v100": 2.0, "k80": 1.0}
    specs = [
        job(f"j{i}", 150.0 + 97.0 * i, workers=1 + i % 2, arrival=45.0 * i, tput=tput)
        for i in range(10)
    ]
    assert _run(nodes, specs, policy, True) == _run(nodes, specs, policy, False)


def test_state_round_trip_copies_the_received_times() -> None:
    r = RoundMechanism()
    seen = {"v100": 1.0}
    r.state.seen = {"j": seen}
    state = r.to_state()
    assert state["seen"] == {"j": {"v100": 1.0}}
    assert state["seen"]["j"] is not seen  # JSON-safe plain dicts, not the views' own
    assert RoundMechanism.from_state(state).state.seen == {"j": {"v100": 1.0}}
