"""Teams and quotas: parsing, the default team, and one clear error per bad field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lyra_ray.model import JobSpec
from lyra_ray.model.errors import InputError
from lyra_ray.model.teams import DEFAULT_TEAM, EFFECTIVE, load_teams, parse_teams

CLUSTER = {"v100": 8, "k80": 16}


def test_quota_by_type_uses_the_pool_grammar_and_a_default_team_is_added() -> None:
    ts = parse_teams(
        {
            "teams": {"a": {"quota": "v100=4,k80=2x4", "weight": 2, "borrow_limit": 6}},
            "users": {"alice": "a"},
            "jobs": {"special": "default"},
        },
        "t.yaml",
        CLUSTER,
    )
    a = ts.teams["a"]
    assert a.quota == {"v100": 4.0, "k80": 8.0}
    assert (a.unit, a.weight, a.borrow_limit, a.lend_limit, a.preemptible) == (
        "gpus",
        2.0,
        6.0,
        None,
        True,
    )
    assert not ts.teams[DEFAULT_TEAM].limited
    assert ts.team_of(JobSpec("x", 1.0, user="alice")) == "a"
    assert ts.team_of(JobSpec("special", 1.0, user="alice")) == DEFAULT_TEAM  # job name first
    assert ts.team_of(JobSpec("y", 1.0, user="bob")) == DEFAULT_TEAM  # no team: default


def test_effective_quota_is_in_v100_equivalents() -> None:
    ts = parse_teams({"teams": {"a": {"quota_effective": 8}}}, "t.yaml", CLUSTER)
    assert ts.teams["a"].quota == {EFFECTIVE: 8.0} and ts.unit == "effective"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"teams": {"a": {"quota": "v100=-1"}}}, "teams.a.quota"),
        ({"teams": {"a": {"quota": "a100=2"}}}, "teams.a.quota"),  # type the cluster lacks
        ({"teams": {"a": {"quota_effective": -1}}}, "teams.a.quota_effective"),
        ({"teams": {"a": {"quota_effective": math.nan}}}, "teams.a.quota_effective"),
        ({"teams": {"a": {"quota_effective": math.inf}}}, "teams.a.quota_effective"),
        ({"teams": {"a": {"quota": "v100=2", "weight": 0}}}, "teams.a.weight"),
        ({"teams": {"a": {"quota": "v100=2", "weight": "heavy"}}}, "teams.a.weight"),
        ({"teams": {"a": {"quota": "v100=2", "borrow_limit": -3}}}, "teams.a.borrow_limit"),
        ({"teams": {"a": {"quota": "v100=2", "preemptible": "no"}}}, "teams.a.preemptible"),
        ({"teams": {"a": {"quota": "v100=2", "colour": 1}}}, "teams.a.colour"),
        ({"teams": {"a": {"quota": "v100=2"}}, "users": {"bob": "z"}}, "users.bob"),
        ({"teams": {"a": {"quota": "v100=2"}}, "jobs": {"j1": "z"}}, "jobs.j1"),
        ({"teams": {"a": {"quota": "v100=2", "lend_limit": math.inf}}}, "teams.a.lend_limit"),
        ({"teams": {"a": {"quota": "v100=2"}}, "reference": "a100"}, "reference"),
        ({"teams": {"a": {"quota": "v100=2"}}, "reference": 7}, "reference"),
        ({"teams": {"a": {"quota": "v100=2"}}, "enforce": "outside"}, "enforce"),
        ({"teams": {}}, "teams"),
        ({"teams": {"a": {"quota": "v100=6"}, "b": {"quota": "v100=4"}}}, "teams"),  # 10 > 8
        ({"teams": {"a": {"quota": "v100=2"}, "b": {"quota_effective": 2}}}, "teams"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_teams(raw, "t.yaml", CLUSTER)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"field '{field}'" in msg or f"field '{field}." in msg or field in msg


def test_load_teams_reads_yaml_and_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "teams.yaml"
    p.write_text("teams:\n  a: {quota: v100=2}\nusers: {alice: a}\n")
    assert load_teams(str(p), CLUSTER).users == {"alice": "a"}
    p.write_text("teams: [1, 2\n")
    with pytest.raises(InputError, match=r"teams\.yaml"):
        load_teams(str(p), CLUSTER)


def test_the_reference_type_is_a_setting_and_defaults_to_the_most_common_type() -> None:
    ts = parse_teams({"teams": {"a": {"quota_effective": 2}}}, "t.yaml", CLUSTER)
    assert ts.reference is None and ts.reference_for(CLUSTER) == "k80"  # 16 k80 > 8 v100
    assert ts.reference_for({"h200": 8, "a100": 8}) == "a100"  # a tie: alphabetical
    ts = parse_teams({"teams": {"a": {"quota_effective": 2}}, "reference": "V100"}, "t", CLUSTER)
    assert ts.reference == "v100" and ts.reference_for({"h200": 8}) == "v100"
    auto = parse_teams({"teams": {"a": {"quota_effective": 2}}, "reference": "auto"}, "t")
    assert auto.reference is None


def test_effective_lend_limits_and_guarantees_checked_against_reference_capacity() -> None:
    raw = {"teams": {"a": {"quota_effective": 6, "lend_limit": 2}, "b": {"quota_effective": 6}}}
    ts = parse_teams(raw, "t.yaml", CLUSTER)  # without the capacity in reference units
    assert ts.teams["a"].lend_limit == 2.0
    with pytest.raises(InputError, match=r"field 'teams': effective quotas sum to 12; "):
        parse_teams(raw, "t.yaml", CLUSTER, effective_capacity=11.5)
    assert parse_teams(raw, "t.yaml", CLUSTER, effective_capacity=12.0).unit == "effective"


def test_enforcement_is_inside_unless_pin_is_asked_for() -> None:
    assert parse_teams({"teams": {"a": {"quota": "v100=1"}}}, "t").enforce == "inside"
    ts = parse_teams({"teams": {"a": {"quota": "v100=1"}}, "enforce": "pin"}, "t")
    assert ts.enforce == "pin"
