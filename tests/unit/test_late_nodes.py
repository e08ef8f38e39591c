"""A node that joins late (one the autoscaler started for queued jobs) is used at once.

Found live (#45, tests/ray/test_autoscaler_live.py): three a100 jobs queued on a cluster
with no a100 node; the autoscaler's nodes joined, and the jobs waited "for their turn in
the rounds", the next round ~250 s away, beside idle GPUs. Two gaps, both pure:

- While no rounds run (the policy gave nobody time: nothing could run), only a job
  arrival started them; a node joining only planned the first round ``round_s`` later.
- While rounds run, the allocation in force was solved before the node joined, so the
  new type was in nobody's row: backfill saw no taker, and the round mechanism (like
  Gavel, whose cluster is fixed) adopted a new answer only when the job set changed, so
  policies that never hand out zero-priority GPUs (FIFO) left the node idle for good.

Every round-based policy is checked, with backfill (live) and without (the simulator).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lyra_ray import model as m
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import available_policies, get_policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.rounds import RoundMechanism
from tests.builders import job

ROUND_S = 360.0
POLICIES = available_policies()


def _launched(d: m.Decision) -> list[str]:
    return sorted(a.job_id for a in d.actions if isinstance(a, m.Launch))


def _a100(*names: str) -> list[m.Event]:
    return [m.NodeUp(m.Node(n, "a100", 1)) for n in names]


@pytest.mark.parametrize("backfill", [True, False])
def test_while_no_rounds_run_a_node_joining_starts_them(backfill: bool) -> None:
    core = SchedulerCore(
        get_policy("max_min_fairness"), SpecThroughputs(), ROUND_S, backfill=backfill
    )
    jobs = ("a0", "a1", "a2")
    d = core.step(0.0, [m.JobSubmitted(n, job(n, 600, tput={"a100": 2.0})) for n in jobs])
    assert not _launched(d) and core.next_round_s is None  # nothing can run: no rounds
    d = core.step(20.0, _a100("n1"))  # the first node the autoscaler started
    assert len(_launched(d)) == 1, d.actions
    assert core.next_round_s == 20.0 + ROUND_S  # the rounds started with it
    d = core.step(25.0, _a100("n2"))  # the second joins mid-round: backfilled live
    assert len(_launched(d)) == (1 if backfill else 0), d.actions


@pytest.mark.parametrize("policy", POLICIES)
def test_jobs_queued_without_a_usable_node_start_when_nodes_join(policy: str) -> None:
    """The live scenario: both nodes the autoscaler started join in one cycle (on main
    before the fix every round-based policy started none of the three jobs, and
    finish_time_fairness raised on the empty cluster)."""
    core = SchedulerCore(get_policy(policy), SpecThroughputs(), ROUND_S, backfill=True)
    core.step(0.0, [m.JobSubmitted(n, job(n, 600, tput={"a100": 2.0})) for n in ("a", "b", "c")])
    d = core.step(20.0, _a100("n1", "n2"))
    assert len(_launched(d)) == 2, d.actions
    assert not [a for a in d.actions if isinstance(a, m.Preempt)]


def _running_on_v100(policy: str, backfill: bool) -> SchedulerCore:
    """One V100, three jobs that can also use an A100 (none yet): one runs."""
    core = SchedulerCore(get_policy(policy), SpecThroughputs(), ROUND_S, backfill=backfill)
    tput = {"a100": 2.0, "v100": 1.0}
    ev: list[m.Event] = [m.NodeUp(m.Node("v", "v100", 1))]
    ev += [m.JobSubmitted(n, job(n, 6000, tput=tput)) for n in ("a0", "a1", "a2")]
    assert len(_launched(core.step(0.0, ev))) == 1
    return core


def _busy(core: SchedulerCore) -> list[str]:
    return sorted(j.current.gpu_type for j in core.active() if j.current is not None)


@pytest.mark.parametrize("backfill", [True, False])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_new_type_that_joins_mid_round_is_used(policy: str, backfill: bool) -> None:
    """Live (backfill), a waiting job starts on the new type at once, nobody preempted
    and the round clock kept; by the next round boundary every GPU is busy, with or
    without backfill. On main before the fix the round-based policies left the A100s
    idle until the next round (max-min fairness: handed out at zero priority), or for
    good (the FIFO family, which hands out no zero-priority GPUs: its answer, solved
    before the A100s joined, stayed in force while the job set was the same)."""
    core = _running_on_v100(policy, backfill)
    next_round = core.next_round_s
    d = core.step(20.0, _a100("n1", "n2"))
    if backfill:
        assert _launched(d) and "a100" in _busy(core), d.actions
        assert not [a for a in d.actions if isinstance(a, m.Preempt)]
        assert "v100" in _busy(core)  # the running job kept its GPU
        assert core.next_round_s == next_round
    core.step(ROUND_S, [])
    assert _busy(core) == ["a100", "a100", "v100"], (d.actions, core.wait_reasons())


def test_the_round_mechanism_adopts_a_new_answer_when_the_capacity_changes() -> None:
    core = _running_on_v100("max_min_fairness", backfill=False)
    rounds = core.rounds
    assert isinstance(rounds, RoundMechanism) and rounds.state.capacity == {"v100": 1}
    snap = core.snapshot()
    assert not rounds.would_adopt(snap)  # the same jobs on the same nodes
    both = replace(snap, nodes=(*snap.nodes, m.Node("n1", "a100", 1)))
    assert rounds.would_adopt(both)
    # an inference node is not the training pool's capacity
    served = replace(snap, nodes=(*snap.nodes, m.Node("s", "a100", 1, pool="inference")))
    assert not rounds.would_adopt(served)
    # kept across a restore; a state saved before it was kept decides as before
    assert RoundMechanism.from_state(rounds.to_state()).would_adopt(both)
    old = {k: v for k, v in rounds.to_state().items() if k != "capacity"}
    assert not RoundMechanism.from_state(old).would_adopt(both)


def test_the_interval_between_resets_still_holds_for_a_capacity_change() -> None:
    core = SchedulerCore(
        get_policy("max_min_fairness"),
        SpecThroughputs(),
        ROUND_S,
        rounds=RoundMechanism(min_reset_interval_s=1920.0),
    )
    core.step(100.0, [m.NodeUp(m.Node("v", "v100", 1)), m.JobSubmitted("a", job("a", 1e6))])
    snap = core.snapshot()
    both = replace(snap, nodes=(*snap.nodes, m.Node("n1", "a100", 1)))
    assert not core.rounds.would_adopt(replace(both, now=200.0))
    assert core.rounds.would_adopt(replace(both, now=2100.0))
