"""Quota accounting: guarantee, used, borrowed and lent, in GPUs by type or V100-eq."""

from __future__ import annotations

import pytest

from lyra_ray.model import JobSpec
from lyra_ray.model.team_accounting import account, job_cost
from lyra_ray.model.teams import EFFECTIVE, parse_teams
from lyra_ray.model.types import ThroughputModel


def spec(name: str, user: str, lo: int = 1) -> JobSpec:
    return JobSpec(name, 1e6, lo, lo, user=user, throughput={"v100": 2.0, "k80": 0.5})


TEAMS = {
    "teams": {"a": {"quota": "v100=4"}, "b": {"quota": "v100=4", "lend_limit": 1}},
    "users": {"alice": "a", "bob": "b"},
}


def test_borrowed_comes_from_unowned_capacity_first_then_the_lenders() -> None:
    ts = parse_teams(TEAMS, "t", {"v100": 10})
    uses = [(spec("a1", "alice", 4), "v100", 4.0), (spec("a2", "alice", 3), "v100", 3.0)]
    st = account(ts, {"v100": 10}, uses, ThroughputModel())
    a, b = st["a"], st["b"]
    assert a.guarantee == {"v100": 4.0} and a.used == {"v100": 7.0}
    assert a.borrowed == {"v100": 3.0}
    # 2 GPUs no guarantee covers serve 2 of the 3 borrowed; b lends the last one
    assert b.lent == {"v100": 1.0} and b.used == {} and a.lent == {}
    assert st["default"].guarantee is None


def test_lend_limit_caps_what_a_lender_is_charged() -> None:
    ts = parse_teams(TEAMS, "t", {"v100": 8})
    uses = [(spec("a1", "alice", 8), "v100", 8.0)]  # 4 borrowed, b idle but lends <= 1
    st = account(ts, {"v100": 8}, uses, ThroughputModel())
    assert st["a"].borrowed == {"v100": 4.0}
    assert st["b"].lent == {"v100": 1.0}


def test_default_team_use_is_all_borrowed() -> None:
    ts = parse_teams(TEAMS, "t", {"v100": 8})
    st = account(ts, {"v100": 8}, [(spec("c", "carol", 2), "v100", 2.0)], ThroughputModel())
    assert st["default"].used == {"v100": 2.0} and st["default"].borrowed == {"v100": 2.0}
    # split by what each leaves idle to lend: a 4, b 1 (its lend_limit)
    assert st["a"].lent == {"v100": pytest.approx(1.6)}
    assert st["b"].lent == {"v100": pytest.approx(0.4)}


def test_effective_units_follow_the_jobs_own_throughput_ratio() -> None:
    s = spec("a1", "alice", 2)
    assert job_cost(s, "k80", 2, ThroughputModel(), "effective", "v100") == (EFFECTIVE, 0.5)
    assert job_cost(s, "v100", 2, ThroughputModel(), "gpus", "v100") == ("v100", 2.0)
    ts = parse_teams(
        {"teams": {"a": {"quota_effective": 1}}, "users": {"alice": "a"}, "reference": "v100"},
        "t",
        {"v100": 2},
    )
    st = account(ts, {"v100": 2, "k80": 8}, [(s, "k80", 8.0)], ThroughputModel())
    assert st["a"].used == {EFFECTIVE: pytest.approx(2.0)}
    assert st["a"].borrowed == {EFFECTIVE: pytest.approx(1.0)}
    assert st["a"].to_json()["unit"] == "effective" and st["a"].reference == "v100"
    assert st["a"].notes == ()


def test_default_reference_is_the_most_common_type_and_a_missing_rate_is_named() -> None:
    """On 8 k80 beside 2 v100 the reference is the k80: a k80 counts 1, a v100 four (this
    job's ratio). A job with no rate on the reference counts the type's factor, said so."""
    s = spec("a1", "alice", 2)
    ts = parse_teams({"teams": {"a": {"quota_effective": 1}}, "users": {"alice": "a"}}, "t")
    st = account(ts, {"v100": 2, "k80": 8}, [(s, "v100", 2.0), (s, "k80", 1.0)], ThroughputModel())
    assert st["a"].reference == "k80"
    assert st["a"].used == {EFFECTIVE: pytest.approx(2 * 4.0 + 1.0)}
    only_v100 = JobSpec("v", 1e6, 1, 1, user="alice", throughput={"v100": 1.0})
    st = account(
        ts,
        {"v100": 2, "k80": 8},
        [(only_v100, "v100", 1.0), (s, "k80", 1.0)],
        ThroughputModel(),
    )
    # the v100's factor from the jobs that have both rates: spec a1's 4.0
    assert st["a"].used == {EFFECTIVE: pytest.approx(4.0 + 1.0)}
    (note,) = st["a"].notes
    assert "'v'" in note and "no rate on k80" in note and "4 k80" in note
