"""Why a job waits (#30, item 5): every job that holds no GPUs has a stable code and a
sentence, from the core's state, the policy's allocation and the round clock."""

from __future__ import annotations

from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.lyra.two_phase import LyraPolicy
from lyra_ray.scheduling.waiting import CODES, wait_reasons
from tests.builders import job


def _reasons(policy: str, specs: list[JobSpec], nodes: list[Node]) -> dict[str, tuple[str, str]]:
    """Arrive every job at 0, decide once, and ask the core."""
    from lyra_ray import model as m
    from lyra_ray.scheduling.core import SchedulerCore

    core = SchedulerCore(get_policy(policy), SpecThroughputs(), 60.0)
    core.step(0.0, [m.NodeUp(n) for n in nodes] + [m.JobSubmitted(s.name, s) for s in specs])
    return {core.jobs[j].spec.name: (r.code, r.message) for j, r in core.wait_reasons().items()}


def test_a_job_whose_minimum_fits_nowhere_says_so() -> None:
    got = _reasons("fifo", [job("big", workers=8, tput={"v100": 1.0, "k80": 1.0})],
                   [Node("v0", "v100", 4), Node("k0", "k80", 2)])  # fmt: skip
    code, message = got["big"]
    assert code == "no_fit" and "8 GPUs" in message and "v100: 4" in message


def test_a_job_behind_others_waits_for_capacity() -> None:
    specs = [
        job("first", workers=2, tput={"v100": 1.0}),
        job("second", workers=2, tput={"v100": 1.0}),
    ]
    got = _reasons("fifo", specs, [Node("v0", "v100", 2)])
    assert set(got) == {"second"} and got["second"][0] == "capacity"
    assert "v100" in got["second"][1]


def test_a_job_with_time_in_the_rounds_waits_for_its_turn() -> None:
    specs = [job(f"j{i}", tput={"v100": 1.0}) for i in range(3)]
    got = _reasons("max_min_fairness", specs, [Node("v0", "v100", 2)])
    assert len(got) == 1
    ((code, message),) = got.values()
    assert code == "round" and "of its time" in message and "next round" in message


def test_lyras_loan_rule_keeps_a_long_job_off_lent_servers() -> None:
    long_job = JobSpec("long", 10**7, 1, 2, throughput={"v100": 1.0, "t4": 1.0})
    full = JobSpec("busy", 10**3, 2, 2, throughput={"v100": 1.0})
    busy = JobView("busy", full, 0.0, JobStatus.RUNNING, 0.0, 0.0, {}, {},
                   Assignment("v100", 2, (("v0", 2),)))  # fmt: skip
    queued = JobView("long", long_job, 0.0, JobStatus.QUEUED, 0.0, 0.0, {}, {}, None)
    nodes = (Node("v0", "v100", 2), Node("t0", "t4", 2, "inference"))
    snap = ClusterSnapshot(0.0, nodes, (busy, queued), SpecThroughputs(), serving_demand=0,
                           lent_nodes=frozenset({"t0"}))  # fmt: skip
    alloc = LyraPolicy(reserve_fraction=0.0).allocate(snap)
    assert "long" not in alloc.workers and "t0" in alloc.lend
    got = wait_reasons(snap, alloc, None)
    assert got["long"].code == "loan_rule" and "4-hour rule" in got["long"].message


def test_the_codes_are_the_documented_ones() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    for code in (*CODES, "submitted"):
        assert f"`{code}`" in doc, code


def test_a_teams_quota_reason_is_derived_when_asked_not_carried_in_the_answer() -> None:
    """The core asks the policy (``Policy.waiting``) only when reasons are read: the
    teams wrapper's ``quota`` reasons never ride in the committed allocation."""
    from lyra_ray import model as m
    from lyra_ray.model.teams import parse_teams
    from lyra_ray.policies.teams import with_teams
    from lyra_ray.scheduling.core import SchedulerCore

    teams = parse_teams(
        {"teams": {"a": {"quota": "v100=1", "borrow_limit": 0}}, "users": {"alice": "a"}}, "t"
    )
    specs = [JobSpec(f"j{i}", 1e6, 1, 1, user="alice", throughput={"v100": 1.0}) for i in range(3)]
    core = SchedulerCore(with_teams(get_policy("fifo_nonpreemptive"), teams), SpecThroughputs())
    core.step(0.0, [m.NodeUp(Node("v0", "v100", 4))] + [m.JobSubmitted(s.name, s) for s in specs])
    assert not core.decider.allocation.waiting
    got = {core.jobs[j].spec.name: r for j, r in core.wait_reasons().items()}
    assert sorted(got) == ["j1", "j2"] and {r.code for r in got.values()} == {"quota"}
    assert "team a's quota" in got["j1"].message and "limit 0" in got["j1"].message
