"""Archiving terminal jobs changes no decision (issue #17, item 7).

The live scheduler hands terminal jobs out of the core (``take_terminal``) into a SQLite
archive after every cycle, so that its per-cycle state stays flat. For every registered
policy, a mid-workload core and a twin restored from the same JSON state, whose
terminal jobs are handed out before every step, fold the same events: both must decide
the same actions and end in the same state, less the archived jobs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lyra_ray import model as m
from lyra_ray.policies.base import available_policies, get_policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.sim.simulator import Simulator
from tests.sim.test_restart_decides_alike import WORKLOADS, _next_events


def _without_terminal(state: dict[str, Any]) -> dict[str, Any]:
    terminal = {s.value for s in m.JobStatus if s.terminal}
    return {**state, "jobs": [j for j in state["jobs"] if j["status"] not in terminal]}


@pytest.mark.parametrize("policy", available_policies())
def test_a_core_that_archives_decides_like_one_that_keeps_every_job(policy: str) -> None:
    nodes, specs, model, _ = WORKLOADS["loan"]()
    sim = Simulator(nodes, get_policy(policy), model, round_s=120.0, serving_demand=[(0.0, 1)])
    sim.max_time_s = 2_400.0  # some jobs finished, some still run
    core = sim.run(specs).core
    assert any(j.status is m.JobStatus.RUNNING for j in core.jobs.values())
    twin = SchedulerCore(get_policy(policy), WORKLOADS["loan"]()[2], round_s=core.round_s)
    twin.load_state(json.loads(json.dumps(core.to_state())))
    ended = {j.id for j in twin.take_terminal()}
    assert ended == {j.id for j in core.jobs.values() if j.status.terminal}
    assert ended, "mid-workload: some jobs have finished"
    assert not any(j.status.terminal for j in twin.jobs.values())
    for t, events in _next_events(core, specs[0]):
        assert twin.step(t, events) == core.step(t, events), (policy, t)
        ended |= {j.id for j in twin.take_terminal()}
    assert twin.to_state() == _without_terminal(core.to_state())
    assert ended == {j.id for j in core.jobs.values() if j.status.terminal}


def test_take_terminal_hands_each_job_out_once_and_a_restore_keeps_none() -> None:
    nodes, specs, model, _ = WORKLOADS["loan"]()
    core = SchedulerCore(get_policy("fifo"), model, round_s=60.0)
    core.step(0.0, [m.NodeUp(n) for n in nodes])
    core.step(1.0, [m.JobSubmitted(f"j{i}", s) for i, s in enumerate(specs[:4])])
    assert core.take_terminal() == []
    core.step(2.0, [m.JobCompleted("j0", specs[0].total_steps), m.JobCancelled("j1")])
    out = core.take_terminal()
    assert [(j.id, j.status) for j in out] == [
        ("j0", m.JobStatus.FINISHED),
        ("j1", m.JobStatus.CANCELLED),
    ]
    assert out[0].steps_done == specs[0].total_steps
    assert core.take_terminal() == []
    assert set(core.jobs) == {"j2", "j3"}
    # Events about a job already handed out are ignored, as for any terminal job.
    core.step(3.0, [m.JobCompleted("j0", 1.0), m.JobStopped("j1", 5.0), m.JobCancelled("j0")])
    assert set(core.jobs) == {"j2", "j3"} and core.take_terminal() == []
    # A state saved before the hand-out still holds terminal jobs: a restore hands them out.
    core.step(4.0, [m.JobFailed("j2", "boom")])
    twin = SchedulerCore(get_policy("fifo"), model, round_s=60.0)
    twin.load_state(json.loads(json.dumps(core.to_state())))
    assert [j.id for j in twin.take_terminal()] == ["j2"]
