"""A restarted scheduler makes the same next decisions as the one that died.

For every registered policy a workload runs through the real core and simulator until
it is mid-way (jobs running, queued and finished). The core's saved state goes through
JSON, as the live scheduler persists it, into a fresh core with a fresh policy, round
mechanism and throughput model: no cache, no warm start. Both cores then fold the same
events (an arrival, a change of serving demand, a round boundary, a completion) and
must decide the same actions with the same next wakeup, and end in the same state.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lyra_ray import model as m
from lyra_ray.model import JobSpec, Node
from lyra_ray.model.throughput import SpecThroughputs, load_gavel_throughputs
from lyra_ray.policies.base import available_policies, get_policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.sim.simulator import Simulator
from lyra_ray.sim.traces import read_gavel_trace

GAVEL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "gavel"
TRACE = GAVEL / "traces" / "generated_continuous_single_seed0_lam1200_3000jobs.trace"


def _loan_workload() -> tuple[list[Node], list[JobSpec], m.ThroughputModel, float]:
    """Elastic and rigid jobs, two training types and an inference pool with demand."""
    nodes = [Node(f"v{i}", "v100", 4) for i in range(2)] + [Node("k0", "k80", 4)]
    nodes += [Node(f"i{i}", "t4", 1, "inference") for i in range(4)]
    specs = [
        JobSpec(
            name=f"j{i}",
            total_steps=1500.0 + 400 * i,
            arrival_s=45.0 * i,
            min_workers=1 if i % 2 == 0 else 2,
            max_workers=4 if i % 2 == 0 else 2,
            throughput={"v100": 1.0, "k80": 0.4, "t4": 0.5},
        )
        for i in range(12)
    ]
    return nodes, specs, SpecThroughputs(), 900.0


def _gavel_workload() -> tuple[list[Node], list[JobSpec], m.ThroughputModel, float]:
    """Gavel's job types (with co-location throughputs, for the packed policies)."""
    model = load_gavel_throughputs(GAVEL / "simulation_throughputs.json")
    specs = read_gavel_trace(TRACE, known_job_types=model.job_types)[:30]
    nodes = [Node(f"{g}-{i}", g, 2) for g in ("v100", "p100", "k80") for i in range(2)]
    return nodes, specs, model, 30_000.0


WORKLOADS = {"loan": _loan_workload, "gavel": _gavel_workload}


def _restored(core: SchedulerCore, policy: str, model: m.ThroughputModel) -> SchedulerCore:
    """A new core, as a restarted scheduler builds one, from the saved state."""
    state = json.loads(json.dumps(core.to_state()))
    twin = SchedulerCore(get_policy(policy), model, round_s=core.round_s)
    twin.load_state(state)
    return twin


def _next_events(core: SchedulerCore, spec: JobSpec) -> list[tuple[float, list[m.Event]]]:
    """Events both cores fold after the restart: an arrival and a demand change now,
    the next round boundary (or a minute later), then a running job's completion."""
    now = core.now + 1.0
    later = core.next_round_s if core.next_round_s is not None else now + 60.0
    later = max(later, now + 1.0)
    arrival = dataclasses.replace(spec, name="late", arrival_s=now)
    running = sorted(j.id for j in core.active() if j.current is not None)
    last: list[m.Event] = []
    if running:
        done = core.jobs[running[0]]
        last = [m.JobCompleted(done.id, done.spec.total_steps)]
    return [
        (now, [m.JobSubmitted("late-0", arrival), m.ServingDemand(1)]),
        (later, []),
        (later + 5.0, last),
    ]


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("policy", available_policies())
def test_restarted_core_decides_like_the_one_that_died(policy: str, workload: str) -> None:
    if workload == "gavel" and not TRACE.exists():
        pytest.skip(f"{TRACE} not found")
    nodes, specs, model, stop_s = WORKLOADS[workload]()
    demand = [(0.0, 1), (300.0, 3)] if workload == "loan" else []
    sim = Simulator(nodes, get_policy(policy), model, round_s=120.0, serving_demand=demand)
    sim.max_time_s = stop_s
    core = sim.run(specs).core
    states = {j.status for j in core.jobs.values()}
    assert m.JobStatus.RUNNING in states, states  # mid-workload: something runs
    twin = _restored(core, policy, WORKLOADS[workload]()[2])
    assert twin.to_state() == json.loads(json.dumps(core.to_state()))
    for t, events in _next_events(core, specs[0]):
        assert twin.step(t, events) == core.step(t, events), (policy, t)
    assert twin.to_state() == core.to_state()


STATEFUL = "fifo"  # keeps per-job GPU types (its saved state is not empty)


@pytest.mark.parametrize("policy", available_policies())
def test_a_restart_under_another_policy_keeps_every_job(policy: str) -> None:
    """#42, item 1: a scheduler started with another ``--policy`` over a saved state drops
    that policy's own state (its rounds and allocation too) and keeps every job as it
    was; it then decides over them, and nothing it decides breaks an invariant. A state
    saved under the same policy is restored whole (the test above)."""
    from tests.builders import check_invariants

    nodes, specs, model, _ = _loan_workload()
    sim = Simulator(nodes, get_policy(STATEFUL), model, round_s=120.0)
    sim.max_time_s = 600.0
    core = sim.run(specs).core
    saved = json.loads(json.dumps(core.to_state()))
    assert saved["policy_name"] == STATEFUL and saved["policy"], saved["policy"]
    twin = SchedulerCore(get_policy(policy), SpecThroughputs(), round_s=core.round_s)
    twin.load_state(saved)
    assert twin.decider.dropped_policy_state == (None if policy == STATEFUL else STATEFUL)
    assert twin.to_state()["jobs"] == saved["jobs"]  # every job, as it was
    assert twin.to_state()["nodes"] == saved["nodes"]
    for t, events in _next_events(core, specs[0]):
        twin.step(t, events)
        check_invariants(twin)
    assert len(twin.jobs) == len(core.jobs) + 1  # the late arrival too


def test_a_state_saved_before_the_policy_name_was_kept() -> None:
    """An older state has no ``policy_name``: its policy state loads if this policy takes
    it, and is dropped (jobs kept) if this policy refuses it, as the live scheduler's
    'policy lyra keeps no state, but a saved state has [kept, rng]' did at start."""
    nodes, specs, model, _ = _loan_workload()
    sim = Simulator(nodes, get_policy(STATEFUL), model, round_s=120.0)
    sim.max_time_s = 600.0
    saved = json.loads(json.dumps(sim.run(specs).core.to_state()))
    del saved["policy_name"]
    same = SchedulerCore(get_policy(STATEFUL), SpecThroughputs(), round_s=120.0)
    same.load_state(saved)
    assert same.decider.dropped_policy_state is None
    assert same.decider.policy.to_state() == saved["policy"]
    other = SchedulerCore(get_policy("lyra"), SpecThroughputs(), round_s=120.0)
    other.load_state(saved)
    assert other.decider.dropped_policy_state == "an earlier policy"
    assert other.to_state()["jobs"] == saved["jobs"]
