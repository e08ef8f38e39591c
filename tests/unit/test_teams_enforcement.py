"""Enforcement: admission by team, borrowing, reclaim order, and no teams = no change."""

from __future__ import annotations

import pytest

from lyra_ray.model import Allocation
from lyra_ray.model.teams import parse_teams
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.teams import TeamPolicy
from lyra_ray.policies.teams.admission import QUOTA, admit
from lyra_ray.policies.teams.pinned import spare_inference
from tests.unit.teams_helpers import catalogue, cluster, job

TEAMS = parse_teams(
    {
        "teams": {"a": {"quota": "v100=4"}, "b": {"quota": "v100=4"}},
        "users": {"alice": "a", "bob": "b"},
    },
    "t",
    {"v100": 8},
)


def a_borrowing() -> list:  # type: ignore[type-arg]
    """Team a runs 5 GPUs' minimums (1 borrowed) and an elastic job that wants 8."""
    return [
        job("ea", "alice", 1, 8, running=4, started=0.0),
        job("ra1", "alice", 2, running=2, started=10.0),
        job("ra2", "alice", 2, running=2, started=20.0),
    ]


def test_idle_quota_is_lent_elastic_jobs_grow_into_it() -> None:
    adm = admit(cluster(a_borrowing()), TEAMS, {})
    assert set(adm.gpu_type) == {"ea", "ra1", "ra2"}
    assert adm.borrowed == {"ra2"}
    assert adm.max_workers == {"ea": 4, "ra1": 2, "ra2": 2}  # all 8 GPUs in use


def test_lender_submits_elastic_borrower_shrinks_before_any_preemption() -> None:
    jobs = [*a_borrowing(), job("b1", "bob", 2, arrival=50.0)]
    adm = admit(cluster(jobs), TEAMS, {})
    assert set(adm.gpu_type) == {"ea", "ra1", "ra2", "b1"}  # nobody preempted
    assert adm.max_workers["ea"] == 2  # the elastic job gave back 2
    assert not adm.waiting


def test_then_the_newest_borrowed_rigid_job_is_preempted() -> None:
    jobs = [*a_borrowing(), job("b1", "bob", 2, arrival=50.0), job("b2", "bob", 2, arrival=60.0)]
    adm = admit(cluster(jobs), TEAMS, {})
    assert "b1" in adm.gpu_type and "b2" in adm.gpu_type  # b gets its whole guarantee
    assert "ra1" in adm.gpu_type and "ra2" not in adm.gpu_type  # newest borrowed one goes
    assert adm.waiting["ra2"][0] == QUOTA and "team a" in adm.waiting["ra2"][1]
    assert adm.max_workers["ea"] == 2  # a's last guaranteed GPU: 8 of 8 in use


def test_non_preemptible_team_keeps_its_running_borrowed_work() -> None:
    ts = parse_teams(
        {
            "teams": {"a": {"quota": "v100=4", "preemptible": False}, "b": {"quota": "v100=4"}},
            "users": {"alice": "a", "bob": "b"},
        },
        "t",
        {"v100": 8},
    )
    jobs = [*a_borrowing(), job("b1", "bob", 2, arrival=50.0), job("b2", "bob", 2, arrival=60.0)]
    adm = admit(cluster(jobs), ts, {})
    assert {"ra1", "ra2"} <= set(adm.gpu_type)


def test_hard_quota_admits_nothing_beyond_the_guarantee() -> None:
    ts = parse_teams(
        {
            "teams": {"a": {"quota": "v100=4", "borrow_limit": 0}, "b": {"quota": "v100=4"}},
            "users": {"alice": "a", "bob": "b"},
        },
        "t",
        {"v100": 8},
    )
    adm = admit(cluster(a_borrowing()), ts, {})
    assert set(adm.gpu_type) == {"ea", "ra1"} and adm.max_workers["ea"] == 2
    assert "limit 0" in adm.waiting["ra2"][1]


def test_spare_inference_servers_go_to_elastic_jobs_and_no_quota() -> None:
    snap = cluster([job("ea", "alice", 1, 8, running=1)], v100=4)
    from dataclasses import replace

    from lyra_ray.model import Node

    inf = tuple(Node(f"i{i}", "v100", 1, "inference") for i in range(3))
    snap = replace(snap, nodes=snap.nodes + inf, serving_demand=1)
    ts = parse_teams(
        {"teams": {"a": {"quota": "v100=2", "borrow_limit": 0}}, "users": {"alice": "a"}},
        "t",
        {"v100": 4},
    )
    spare = spare_inference(snap)
    assert spare == {"v100": 2}
    adm = admit(snap, ts, spare)
    assert adm.max_workers["ea"] == 2 + 2  # its guarantee, plus the two spare servers


def test_effective_quota_counts_a_slow_gpu_for_less() -> None:
    """A K80 is worth half a V100 to these jobs: 4 V100-eq admit 8 K80 workers."""
    ts = parse_teams(
        {
            "teams": {"a": {"quota_effective": 4, "borrow_limit": 0}},
            "users": {"alice": "a"},
            "reference": "v100",
        },
        "t",
        {"v100": 2, "k80": 8},
    )
    jobs = [job(f"k{i}", "alice", 2, running=2, gpu="k80", started=float(i)) for i in range(5)]
    adm = admit(cluster(jobs, v100=2, k80=10), ts, {})
    assert {j for j, g in adm.gpu_type.items() if g == "k80"} == {"k0", "k1", "k2", "k3"}
    assert "limit 0" in adm.waiting["k4"][1]


def test_policy_waits_and_pins() -> None:
    pol = TeamPolicy(get_policy("fifo_nonpreemptive"), TEAMS)
    jobs = [*a_borrowing(), job("b1", "bob", 2, arrival=50.0), job("b2", "bob", 2, arrival=60.0)]
    out = pol.allocate(cluster(jobs))
    assert "ra2" not in out.workers and pol.waiting(cluster(jobs), out)["ra2"][0] == QUOTA
    # with K80s no guarantee covers, ra2 moves there instead of waiting
    out = pol.allocate(cluster(jobs, k80=4))
    assert out.workers["ra2"] == ("k80", 2) and out.workers["b1"] == ("v100", 2)


def test_lyra_inside_teams_keeps_each_team_within_guarantee_plus_borrowing() -> None:
    pol = TeamPolicy(get_policy("lyra"), TEAMS)
    jobs = [*a_borrowing(), job("b1", "bob", 2, arrival=50.0), job("b2", "bob", 2, arrival=60.0)]
    out = pol.allocate(cluster(jobs))
    use = {"a": 0, "b": 0}
    for jid, (_, n) in out.workers.items():
        use["a" if jid.startswith(("ea", "ra")) else "b"] += n
    assert use["b"] == 4 and use["a"] <= 4
    assert out.workers["ea"][1] >= 1 and "ra2" not in out.workers


POLICIES = [
    "fifo_nonpreemptive",
    "fifo",
    "lyra",
    "max_min_fairness_perf",
    "max_min_fairness_water_filling_perf",
    "finish_time_fairness_perf",
]


@pytest.mark.parametrize("name", POLICIES)
def test_no_limited_team_means_the_inner_policy_decides_alone(name: str) -> None:
    jobs = [
        job(f"j{i}", u, lo, hi, arrival=float(i), job_type=jt)
        for i, (u, lo, hi, jt) in enumerate(
            [
                ("alice", 1, 1, "resnet18"),
                ("bob", 2, 2, "resnet50"),
                ("carol", 1, 4, "resnet18"),
                ("alice", 4, 4, "transformer"),
                ("bob", 1, 1, "lm"),
            ]
        )
    ]
    snap = cluster(jobs, v100=4, k80=4, model=catalogue())
    only_default = parse_teams({"teams": {"default": {}}, "users": {"alice": "default"}}, "t")
    plain: Allocation = get_policy(name).allocate(snap)
    wrapped = TeamPolicy(get_policy(name), only_default).allocate(snap)
    assert wrapped == plain


def test_the_wrapper_keeps_the_inner_policys_round_quirks() -> None:
    from lyra_ray.policies.teams import with_teams

    for name in ("fifo", "max_min_fairness", "lyra"):
        inner = get_policy(name)
        pol = with_teams(inner, TEAMS)
        assert pol.shuffle_round_types == inner.shuffle_round_types
        assert pol.round_skip_zero_priority == inner.round_skip_zero_priority


def test_team_weights_reach_gavels_hierarchical_policy_as_entity_weights() -> None:
    from dataclasses import replace

    jobs = [job("x", "a", 1, arrival=0.0), job("y", "b", 1, arrival=1.0)]
    snap = cluster(jobs, v100=1)
    pol = get_policy("max_min_fairness_water_filling_perf")
    even = pol.allocate(snap).fractions
    assert even["x"]["v100"] == pytest.approx(even["y"]["v100"], abs=1e-3)
    heavy = pol.allocate(replace(snap, entity_weights={"a": 2.0})).fractions
    assert heavy["x"]["v100"] == pytest.approx(2 * heavy["y"]["v100"], rel=1e-2)
