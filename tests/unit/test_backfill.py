"""Mid-round backfill: GPUs idle in a round go to a waiting job at once, preempting
nobody and keeping the round clock (live); or wait for the round's end (Gavel, the
simulator's default)."""

from __future__ import annotations

import pytest

from lyra_ray import model as m
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.core import SchedulerCore
from tests.builders import job


def _core(backfill: bool) -> tuple[SchedulerCore, str, str]:
    """One V100, two jobs sharing it in rounds of an hour: one runs, one waits."""
    core = SchedulerCore(
        get_policy("max_min_fairness"), SpecThroughputs(), 3600.0, backfill=backfill
    )
    events: list[m.Event] = [m.NodeUp(m.Node("v0", "v100", 1))]
    events += [m.JobSubmitted(n, job(n, 1000, tput={"v100": 10.0})) for n in ("a", "b")]
    core.step(0.0, events)
    (running,) = [j.id for j in core.active() if j.current is not None]
    (waiting,) = [j.id for j in core.active() if j.current is None]
    return core, running, waiting


@pytest.mark.parametrize("backfill", [True, False])
def test_a_gpu_freed_mid_round_goes_to_the_waiting_job_only_with_backfill(
    backfill: bool,
) -> None:
    core, running, waiting = _core(backfill)
    assert core.next_round_s == 3600.0
    d = core.step(100.0, [m.JobCompleted(running, 1000.0)])
    launched = [a.job_id for a in d.actions if isinstance(a, m.Launch)]
    assert launched == ([waiting] if backfill else [])  # Gavel: it idles to the round's end
    assert (core.jobs[waiting].current is not None) is backfill
    assert core.next_round_s == 3600.0  # the round clock is the round's, either way


@pytest.mark.parametrize("backfill", [True, False])
def test_an_arrival_that_idle_gpus_fit_starts_without_preempting_anyone(
    backfill: bool,
) -> None:
    core, running, waiting = _core(backfill)
    core.step(30.0, [m.NodeUp(m.Node("t0", "t4", 1))])  # idle, but only for a T4 job
    d = core.step(40.0, [m.JobSubmitted("c", job("c", 100, tput={"t4": 5.0}))])
    assert not [a for a in d.actions if isinstance(a, m.Preempt)]
    launched = [a.job_id for a in d.actions if isinstance(a, m.Launch)]
    assert launched == (["c"] if backfill else [])
    assert core.jobs[running].current is not None  # the running V100 job keeps its GPU
    assert core.jobs[waiting].current is None  # and the waiting one waits for the round
    assert core.next_round_s == 3600.0
    d = core.step(3600.0, [])  # the real round rotates the V100 as Gavel would
    assert core.jobs[waiting].current is not None and core.jobs[running].current is None


def test_no_backfill_without_an_event_or_without_a_taker() -> None:
    core, running, waiting = _core(True)
    d = core.step(50.0, [m.JobProgress(running, 500.0)])  # progress frees nothing
    assert not d.actions
    # GPUs come up that the waiting job cannot use (V100 only): nothing to hand out
    d = core.step(60.0, [m.NodeUp(m.Node("t0", "t4", 1))])
    assert not [a for a in d.actions if isinstance(a, m.Launch | m.Preempt)]
    assert core.jobs[waiting].current is None and core.next_round_s == 3600.0


def test_backfill_hands_freed_gpus_out_under_the_allocation_in_force_without_a_solve() -> None:
    """A completion mid-round whose GPUs a covered waiting job can take is backfilled from
    the allocation in force: no new solve (with 10,000 queued jobs one takes seconds),
    and the new job set is adopted at the next round boundary."""
    core = SchedulerCore(get_policy("max_min_fairness"), SpecThroughputs(), 3600.0, backfill=True)
    events: list[m.Event] = [m.NodeUp(m.Node("v0", "v100", 1))]
    events += [m.JobSubmitted(n, job(n, 1000, tput={"v100": 10.0})) for n in ("a", "b", "c")]
    core.step(0.0, events)
    solves: list[float] = []
    policy = core.decider.policy
    allocate = policy.allocate

    def counting(snap: m.ClusterSnapshot) -> m.Allocation:
        solves.append(snap.now)
        return allocate(snap)

    policy.allocate = counting  # type: ignore[method-assign]
    (running,) = [j.id for j in core.active() if j.current is not None]
    d = core.step(100.0, [m.JobCompleted(running, 1000.0)])
    launched = [a.job_id for a in d.actions if isinstance(a, m.Launch)]
    assert len(launched) == 1 and launched[0] != running  # a covered waiting job starts
    assert solves == []  # ... under the allocation in force
    assert core.next_round_s == 3600.0
    core.step(3600.0, [])
    assert solves == [3600.0]  # the boundary adopts the smaller job set
