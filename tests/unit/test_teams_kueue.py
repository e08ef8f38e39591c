"""Lyra's teams against the reference implementation of the field: cases of Kueue's
scheduler tests, restated in GPUs (issue #42).

Each test names its source case in kubernetes-sigs/kueue: ``pkg/scheduler/
scheduler_test.go`` (``TestSchedule``) or ``pkg/scheduler/preemption/
preemption_test.go`` (``TestPreemption``). A ClusterQueue is a team, its nominal quota
the team's guarantee, its ``borrowingLimit`` and ``lendingLimit`` the team's
``borrow_limit`` and ``lend_limit``; one cohort is the cluster, whose GPUs are the sum of
the cohort's nominal quotas (Kueue's cohort has no capacity of its own); CPUs become GPUs
of one type, pods of one CPU become one GPU each. A workload already admitted is a
running job (``ReserveQuotaAt``); its start time orders the running jobs where Kueue's
priorities would (Kueue preempts the lowest priority first, then the newest; lyra's
teams have no priorities and take back from the newest borrowed job first), and the
cases are set so both rules point at the same job.

Every case runs twice, inside the two greedy policies that grant workers through the
teams' ledger (``fifo_nonpreemptive``, ``lyra``): the teams layer, not one policy's
order, gives the answer. Where lyra differs from Kueue by design, the test asserts
lyra's outcome and says so (docs/teams.md, "Kueue"): an elastic borrower shrinks before
any workload is preempted; a team's new job never preempts its own team's running
ones; a team may borrow a GPU type its quota does not name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from lyra_ray.model import Allocation, JobView
from lyra_ray.model.teams import parse_teams
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.teams import TeamPolicy
from lyra_ray.policies.teams.admission import QUOTA
from tests.unit.teams_helpers import cluster, job

INNER = ["fifo_nonpreemptive", "lyra"]


def decide(inner: str, teams: dict[str, Any], jobs: list[JobView], **gpus: int) -> Allocation:
    """One decision of ``teams(<inner>)``; every team name is also its one user."""
    raw = {"teams": teams, "users": {name: name for name in teams}}
    ts = parse_teams(raw, "kueue", {"v100": gpus.get("v100", 0), "k80": gpus.get("k80", 0)})
    snap = cluster(jobs, v100=gpus.get("v100", 0), k80=gpus.get("k80", 0))
    pol = TeamPolicy(get_policy(inner), ts)
    out = pol.allocate(snap)
    return dataclasses.replace(out, waiting={**pol.waiting(snap, out), **out.waiting})


def waits_for_quota(out: Allocation, job_id: str) -> str:
    assert job_id not in out.workers
    code, why = out.waiting[job_id]
    assert code == QUOTA, why
    return why


# ---------------------------------------------------------------- scheduler_test.go


@pytest.mark.parametrize("inner", INNER)
def test_single_clusterqueue_full(inner: str) -> None:
    """TestSchedule "single clusterQueue full": sales (50, no borrowing) runs 40; a new
    workload of 11 waits for quota, though the cluster has room (another team's idle
    guarantee, which sales may not borrow)."""
    teams = {"sales": {"quota": "v100=50", "borrow_limit": 0}, "other": {"quota": "v100=50"}}
    jobs = [job("assigned", "sales", 40, running=40, started=0.0), job("new", "sales", 11)]
    out = decide(inner, teams, jobs, v100=100)
    assert out.workers["assigned"] == ("v100", 40)
    assert "limit 0" in waits_for_quota(out, "new")


@pytest.mark.parametrize("inner", INNER)
def test_admit_in_same_cohort_with_no_borrowing(inner: str) -> None:
    """TestSchedule "admit in same cohort with no borrowing": eng-alpha and eng-beta (50
    each) each admit a workload of 40 within their own quota."""
    teams = {"eng-alpha": {"quota": "v100=50"}, "eng-beta": {"quota": "v100=50"}}
    jobs = [job("alpha-new", "eng-alpha", 40), job("beta-new", "eng-beta", 40, arrival=1.0)]
    out = decide(inner, teams, jobs, v100=100)
    assert out.workers == {"alpha-new": ("v100", 40), "beta-new": ("v100", 40)}


@pytest.mark.parametrize("inner", INNER)
def test_cannot_borrow_if_cohort_was_assigned_and_would_result_in_overadmission(
    inner: str,
) -> None:
    """TestSchedule "cannot borrow if cohort was assigned and would result in
    overadmission": alpha admits 45 of its 50; beta's 56 would borrow 6 (its limit is 10)
    but only 5 are left in the cohort: beta waits, whichever comes first."""
    teams = {
        "eng-alpha": {"quota": "v100=50", "borrow_limit": 50},
        "eng-beta": {"quota": "v100=50", "borrow_limit": 10},
    }
    for first, second in ((0.0, 1.0), (1.0, 0.0)):
        jobs = [
            job("alpha-new", "eng-alpha", 45, arrival=first),
            job("beta-new", "eng-beta", 56, arrival=second),
        ]
        out = decide(inner, teams, jobs, v100=100)
        assert out.workers == {"alpha-new": ("v100", 45)}
        assert "eng-alpha" in waits_for_quota(out, "beta-new")  # alpha's guarantee holds


@pytest.mark.parametrize("inner", INNER)
def test_can_borrow_if_cohort_was_assigned_and_will_not_result_in_overadmission(
    inner: str,
) -> None:
    """TestSchedule "can borrow if cohort was assigned and will not result in
    overadmission": the same with 55: beta borrows 5, both are admitted."""
    teams = {
        "eng-alpha": {"quota": "v100=50", "borrow_limit": 50},
        "eng-beta": {"quota": "v100=50", "borrow_limit": 10},
    }
    jobs = [job("alpha-new", "eng-alpha", 45), job("beta-new", "eng-beta", 55, arrival=1.0)]
    out = decide(inner, teams, jobs, v100=100)
    assert out.workers == {"alpha-new": ("v100", 45), "beta-new": ("v100", 55)}


@pytest.mark.parametrize("inner", INNER)
def test_workload_exceeds_lending_limit_when_borrow_in_cohort(inner: str) -> None:
    """TestSchedule "workload exceeds lending limit when borrow in cohort": lend-a (3,
    lends at most 2) is idle; lend-b (2, lends at most 2) runs a of 2; b (3) would borrow
    3 of lend-a's idle 3, but lend-a lends 2: one more needed, b waits."""
    teams = {
        "lend-a": {"quota": "v100=3", "lend_limit": 2},
        "lend-b": {"quota": "v100=2", "lend_limit": 2},
    }
    jobs = [job("a", "lend-b", 2, running=2, started=0.0), job("b", "lend-b", 3, arrival=1.0)]
    out = decide(inner, teams, jobs, v100=5)
    assert out.workers == {"a": ("v100", 2)}
    assert "lend-a" in waits_for_quota(out, "b")
    # a lending limit of 3 would let it borrow them all
    teams["lend-a"]["lend_limit"] = 3
    assert decide(inner, teams, jobs, v100=5).workers["b"] == ("v100", 3)


@pytest.mark.parametrize("inner", INNER)
def test_two_workloads_can_borrow_the_same_resources_if_fits_in_the_cohort_quota(
    inner: str,
) -> None:
    """TestSchedule "two workloads can borrow the same resources from the same flavor in
    the same cycle if fits in the cohort quota": cq1, cq2, cq3 (10 each, borrow up to
    10); wl1 of 16 (cq1) and wl2 of 14 (cq2) borrow 6 and 4 of cq3's idle 10."""
    teams = {f"cq{i}": {"quota": "v100=10", "borrow_limit": 10} for i in (1, 2, 3)}
    jobs = [job("wl1", "cq1", 16), job("wl2", "cq2", 14, arrival=1.0)]
    assert decide(inner, teams, jobs, v100=30).workers == {
        "wl1": ("v100", 16),
        "wl2": ("v100", 14),
    }


@pytest.mark.parametrize("inner", INNER)
def test_only_one_workload_can_borrow_if_cohort_quota_cannot_fit(inner: str) -> None:
    """TestSchedule "only one workload can borrow one resources from the same flavor in
    the same cycle if cohort quota cannot fit": wl1 and wl2 of 16 each would need 32 of
    30: the first (Kueue: the higher priority; here: the earlier) is admitted."""
    teams = {f"cq{i}": {"quota": "v100=10", "borrow_limit": 10} for i in (1, 2, 3)}
    jobs = [job("wl1", "cq1", 16), job("wl2", "cq2", 16, arrival=1.0)]
    out = decide(inner, teams, jobs, v100=30)
    assert out.workers == {"wl1": ("v100", 16)}


@pytest.mark.parametrize("inner", INNER)
def test_a_workload_only_preempts_if_it_fits_within_nominal_quota(inner: str) -> None:
    """TestSchedule "A workload is only eligible to do preemptions if it fits fully
    within nominal quota": other-alpha and other-beta (2 each) run a1 and b1 (1 each);
    alpha's incoming 3 is more than its quota: it preempts nobody and waits."""
    teams = {"other-alpha": {"quota": "v100=2"}, "other-beta": {"quota": "v100=2"}}
    jobs = [
        job("a1", "other-alpha", 1, running=1, started=0.0),
        job("b1", "other-beta", 1, running=1, started=0.0),
        job("incoming", "other-alpha", 3, arrival=1.0),
    ]
    out = decide(inner, teams, jobs, v100=4)
    assert out.workers == {"a1": ("v100", 1), "b1": ("v100", 1)}
    assert "other-beta" in waits_for_quota(out, "incoming")


@pytest.mark.parametrize("inner", INNER)
def test_cannot_borrow_resource_not_listed_in_clusterqueue_differs(inner: str) -> None:
    """TestSchedule "cannot borrow resource not listed in clusterQueue": Kueue refuses a
    workload asking for a resource its ClusterQueue lists no quota of. lyra differs by
    design: a team's quota names the types it is *guaranteed*; any type the guarantees
    leave idle may be borrowed (within ``borrow_limit``), so the job runs on the K80s."""
    teams = {"eng-alpha": {"quota": "v100=2"}}
    jobs = [job("v", "eng-alpha", 2, running=2, started=0.0), job("new", "eng-alpha", 1)]
    out = decide(inner, teams, jobs, v100=2, k80=2)
    assert out.workers["new"] == ("k80", 1)
    hard = {"eng-alpha": {"quota": "v100=2", "borrow_limit": 0}}  # Kueue's outcome
    assert "limit 0" in waits_for_quota(decide(inner, hard, jobs, v100=2, k80=2), "new")


# ---------------------------------------------------------------- preemption_test.go

C1_C2 = {
    "c1": {"quota": "v100=6", "borrow_limit": 6},
    "c2": {"quota": "v100=6", "borrow_limit": 6},
}


@pytest.mark.parametrize("inner", INNER)
def test_reclaim_quota_from_borrower(inner: str) -> None:
    """TestPreemption "reclaim quota from borrower": c1 runs c1-low (3); c2 runs c2-high
    (6) and c2-mid (3), borrowing 3 of c1's guarantee. c1's incoming 3 takes it back:
    c2-mid is preempted (Kueue: c2's lower priority; lyra: c2's newer borrowed job), c1
    and c2 end at their guarantees."""
    jobs = [
        job("c1-low", "c1", 3, running=3, started=0.0),
        job("c2-high", "c2", 6, running=6, started=0.0),
        job("c2-mid", "c2", 3, running=3, started=10.0),
        job("in", "c1", 3, arrival=20.0),
    ]
    out = decide(inner, C1_C2, jobs, v100=12)
    assert out.workers == {"c1-low": ("v100", 3), "c2-high": ("v100", 6), "in": ("v100", 3)}
    assert "c1" in waits_for_quota(out, "c2-mid")


@pytest.mark.parametrize("inner", INNER)
def test_reclaim_from_an_elastic_borrower_shrinks_it_instead(inner: str) -> None:
    """TestPreemption "reclaim quota from borrower", with c2's borrower elastic (4
    workers, at least 1) beside a rigid job of 5: Kueue preempts the borrowing workload;
    lyra differs by design: the elastic borrower shrinks to what c2's guarantee leaves
    (1) and nothing is preempted."""
    if inner == "fifo_nonpreemptive":
        pytest.skip("fifo_nonpreemptive runs elastic jobs at their minimum: nothing to shrink")
    jobs = [
        job("c1-low", "c1", 3, running=3, started=0.0),
        job("c2-high", "c2", 5, running=5, started=0.0),
        job("c2-flex", "c2", 1, 4, running=4, started=10.0),
        job("in", "c1", 3, arrival=20.0),
    ]
    out = decide(inner, C1_C2, jobs, v100=12)
    assert out.workers == {
        "c1-low": ("v100", 3),
        "c2-high": ("v100", 5),
        "c2-flex": ("v100", 1),
        "in": ("v100", 3),
    }


@pytest.mark.parametrize("inner", INNER)
def test_no_workloads_borrowing(inner: str) -> None:
    """TestPreemption "no workloads borrowing": c1 runs 4, c2 runs 4 (within its 6): c2
    is at its guarantee and is not preempted; c1's incoming 4 borrows c2's idle 2."""
    jobs = [
        job("c1-high", "c1", 4, running=4, started=0.0),
        job("c2-low-1", "c2", 4, running=4, started=0.0),
        job("in", "c1", 4, arrival=10.0),
    ]
    out = decide(inner, C1_C2, jobs, v100=12)
    assert out.workers == {
        "c1-high": ("v100", 4),
        "c2-low-1": ("v100", 4),
        "in": ("v100", 4),
    }


@pytest.mark.parametrize("inner", INNER)
def test_not_enough_workloads_borrowing(inner: str) -> None:
    """TestPreemption "not enough workloads borrowing": c2 runs 8 (borrowing 2); c1's
    incoming 4 would need more than c2 borrows: nothing is preempted, it waits."""
    jobs = [
        job("c1-high", "c1", 4, running=4, started=0.0),
        job("c2-low-1", "c2", 4, running=4, started=0.0),
        job("c2-low-2", "c2", 4, running=4, started=5.0),
        job("in", "c1", 4, arrival=10.0),
    ]
    out = decide(inner, C1_C2, jobs, v100=12)
    assert set(out.workers) == {"c1-high", "c2-low-1", "c2-low-2"}
    assert "in" not in out.workers


LEND = {
    "lend1": {"quota": "v100=6", "lend_limit": 4},
    "lend2": {"quota": "v100=6", "lend_limit": 2},
}


@pytest.mark.parametrize("inner", INNER)
def test_reclaim_quota_from_lender(inner: str) -> None:
    """TestPreemption "reclaim quota from lender": lend2 runs lend2-high (4) and
    lend2-mid (3), borrowing 1 of lend1's lendable 4; lend1's incoming 3 (beside
    lend1-low, 3) takes its guarantee back: lend2-mid is preempted."""
    jobs = [
        job("lend1-low", "lend1", 3, running=3, started=0.0),
        job("lend2-high", "lend2", 4, running=4, started=0.0),
        job("lend2-mid", "lend2", 3, running=3, started=10.0),
        job("in", "lend1", 3, arrival=20.0),
    ]
    out = decide(inner, LEND, jobs, v100=12)
    assert out.workers == {
        "lend1-low": ("v100", 3),
        "lend2-high": ("v100", 4),
        "in": ("v100", 3),
    }
    assert "lend1" in waits_for_quota(out, "lend2-mid")


@pytest.mark.parametrize("inner", INNER)
def test_cannot_preempt_if_exceeds_requestable_quota_including_lending_limit(
    inner: str,
) -> None:
    """TestPreemption "cannot preempt from other ClusterQueues if exceeds requestable
    quota including lending limit": lend2 runs 10 (its 6 and lend1's lendable 4);
    lend1's incoming 9 exceeds what lend1 can ever hold (its 6 plus lend2's lendable 2):
    lend2's job stays, the incoming one waits."""
    jobs = [
        job("lend2-low", "lend2", 10, running=10, started=0.0),
        job("in", "lend1", 9, arrival=10.0),
    ]
    out = decide(inner, LEND, jobs, v100=12)
    assert out.workers == {"lend2-low": ("v100", 10)}
    assert "lend2" in waits_for_quota(out, "in")


@pytest.mark.parametrize("inner", INNER)
def test_preempt_from_all_clusterqueues_in_cohort_lend_differs(inner: str) -> None:
    """TestPreemption "preempt from all ClusterQueues in cohort-lend": Kueue's incoming 4
    (lend1) preempts lend1-low inside its own queue by priority and lend2-low by reclaim.
    lyra differs by design: a team's jobs have no priorities over each other, so a team's
    new job never preempts its own running ones; lend1's running 5 leave 1 of its
    guarantee, and lend2 borrows only 1, within what lend1 lends: nothing is preempted,
    the incoming job waits."""
    jobs = [
        job("lend1-low", "lend1", 3, running=3, started=0.0),
        job("lend1-mid", "lend1", 2, running=2, started=0.0),
        job("lend2-low", "lend2", 3, running=3, started=0.0),
        job("lend2-mid", "lend2", 4, running=4, started=0.0),
        job("in", "lend1", 4, arrival=10.0),
    ]
    out = decide(inner, LEND, jobs, v100=12)
    assert set(out.workers) == {"lend1-low", "lend1-mid", "lend2-low", "lend2-mid"}
    assert "in" not in out.workers
