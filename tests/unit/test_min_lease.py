"""The core's minimum lease: a live run keeps its GPUs until it has stepped for a while.

Two one-GPU jobs time-share one GPU under max-min fairness, so every round boundary
would swap them. With a lease, a job that has not yet stepped (a live run still
starting) or stepped for less than ``min_lease_s`` is not preempted.
"""

from __future__ import annotations

from lyra_ray import model as m
from lyra_ray.model.throughput import CatalogueThroughputs, catalogue_throughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.core import SchedulerCore
from tests.builders import check_invariants, cluster, job


def _core(min_lease_s: float) -> SchedulerCore:
    core = SchedulerCore(
        get_policy("max_min_fairness"),
        CatalogueThroughputs({}),
        round_s=10.0,
        min_lease_s=min_lease_s,
        startup_grace_s=100.0,
    )
    events: list[m.Event] = [m.NodeUp(n) for n in cluster(v100=1)]
    events += [m.JobSubmitted("a", job("a", 1000)), m.JobSubmitted("b", job("b", 1000))]
    core.step(0.0, events)
    return core


def _running(core: SchedulerCore) -> set[str]:
    return {j.id for j in core.active() if j.current is not None}


def test_without_a_lease_the_round_swaps_jobs() -> None:
    core = _core(0.0)
    first = _running(core)
    core.step(10.0, [])
    assert _running(core) and _running(core) != first


def test_a_job_still_starting_is_not_preempted_within_the_startup_grace() -> None:
    core = _core(30.0)
    (first,) = _running(core)
    for t in (10.0, 20.0, 50.0, 90.0):
        acts = core.step(t, []).actions
        assert _running(core) == {first}, t
        assert not any(isinstance(a, m.Preempt) for a in acts)
        check_invariants(core)
    core.step(110.0, [])  # grace over and still no step: it yields
    assert _running(core) != {first}


def test_the_lease_counts_from_the_first_step() -> None:
    core = _core(30.0)
    (first,) = _running(core)
    core.step(40.0, [m.JobProgress(first, 5.0)])  # first step seen at t=40
    core.step(60.0, [m.JobProgress(first, 25.0)])
    assert _running(core) == {first}
    acts = core.step(70.0, []).actions  # 30 s after the first step: lease over
    assert m.Preempt(first) in acts
    assert _running(core) != {first}


def test_lease_fields_survive_a_restart() -> None:
    core = _core(30.0)
    (first,) = _running(core)
    core.step(40.0, [m.JobProgress(first, 5.0)])
    again = SchedulerCore(
        get_policy("max_min_fairness"), CatalogueThroughputs({}), 10.0, min_lease_s=30.0
    )
    again.load_state(core.to_state())
    assert again.jobs[first].lease_from_s == 40.0
    assert again.jobs[first].launch_steps == 0.0


def test_a_leased_space_sharing_pair_stays_whole() -> None:
    """Both members of a pair are pinned together: the lease of one keeps its partner
    (found live: counting a pinned pair's GPU once per member dropped the second member
    every round, so the pair broke while its runs were still starting)."""
    core = SchedulerCore(
        get_policy("max_min_fairness_packed"),
        catalogue_throughputs(),
        round_s=10.0,
        min_lease_s=10.0,
        startup_grace_s=100.0,
    )
    events: list[m.Event] = [m.NodeUp(n) for n in cluster(v100=1)]
    events += [m.JobSubmitted(x, job(x, 10_000, job_type="a3c")) for x in ("a", "b")]
    core.step(0.0, events)
    pair = {j.id: j.current for j in core.active()}
    assert pair["a"] is not None and pair["a"].partner == "b", pair
    assert pair["b"] is not None and pair["b"].partner == "a", pair
    steps = 0.0
    for t in (10.0, 20.0, 30.0, 40.0, 50.0):
        if t >= 30.0:  # a steps from t=30, b never does (still starting): both stay
            steps += 10.0
        acts = core.step(t, [m.JobProgress("a", steps)] if steps else []).actions
        assert not any(isinstance(x, m.Preempt) for x in acts), (t, acts)
        assert {j.id: j.current for j in core.active()} == pair, t
        check_invariants(core)
