"""Lyra's reclaim knapsack with dependent values (the paper's four-job example).

Four lent servers S1..S4. Job a spans S1 and S2, c spans S2 and S3, d spans S4 and a
training server T1, b runs on training server T2 alone. Values = sum over a server's
jobs of 1 / servers the job spans: S1 = a/2 = 0.5, S2 = a/2 + c/2 = 1, S3 = c/2 = 0.5,
S4 = d/2 = 0.5 — the paper's 0.5, 1, 0.5, 0.5.
"""

from __future__ import annotations

import pytest

from lyra_ray.placement.reclaim import JobFootprint, naive_reclaim, plan_reclaim, server_values

LENT = ("S1", "S2", "S3", "S4")


def jobs(min_workers: int = 1) -> list[JobFootprint]:
    return [
        JobFootprint("a", {"S1": 2, "S2": 2}, min_workers),
        JobFootprint("b", {"T2": 4}, min_workers),
        JobFootprint("c", {"S2": 2, "S3": 2}, min_workers),
        JobFootprint("d", {"S4": 2, "T1": 2}, min_workers),
    ]


def test_server_values_match_the_paper() -> None:
    assert server_values(LENT, jobs()) == pytest.approx(
        {"S1": 0.5, "S2": 1.0, "S3": 0.5, "S4": 0.5}
    )


def test_pick_order_and_value_updates_with_scale_in() -> None:
    # Elastic jobs (min 1 worker): reclaiming a server scales its jobs in.
    plan = plan_reclaim(LENT, jobs(), 4)
    assert plan.order == ("S1", "S3", "S4", "S2")
    first, second, third, last = plan.steps
    assert first.value == pytest.approx(0.5) and first.shrunk == ("a",)
    # a now spans only S2: S2 = a (1) + c/2 = 1.5.
    assert second.values_before == pytest.approx({"S2": 1.5, "S3": 0.5, "S4": 0.5})
    assert second.shrunk == ("c",)
    # c now spans only S2 too: S2 = 2.
    assert third.values_before == pytest.approx({"S2": 2.0, "S4": 0.5})
    assert last.values_before == pytest.approx({"S2": 2.0})
    # Reclaiming S2 leaves a and c with no worker at all: they are preempted.
    assert set(last.preempted) == {"a", "c"}
    assert plan.workers_left == {"a": 0, "c": 0, "d": 2}


def test_preemption_removes_the_job_from_its_other_servers() -> None:
    # Rigid-ish jobs (min 4 = all their workers): any reclaim preempts them, so the
    # servers they also occupy become cheaper.
    plan = plan_reclaim(LENT, jobs(min_workers=4), 2)
    assert plan.order[0] == "S1"
    assert plan.steps[0].preempted == ("a",)
    # a is gone: S2 holds only c/2 now.
    assert plan.steps[1].values_before["S2"] == pytest.approx(0.5)
    assert plan.preempted >= {"a"}


def test_cannot_reclaim_more_than_lent() -> None:
    with pytest.raises(ValueError, match="cannot reclaim"):
        plan_reclaim(LENT, jobs(), 5)


def test_naive_reclaim_ignores_jobs() -> None:
    assert naive_reclaim(LENT, 2) == ("S1", "S2")
