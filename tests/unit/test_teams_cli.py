"""``lyra team``'s command line without a cluster: refusals before any call, and lines
that fit 80 columns."""

from __future__ import annotations

import pytest

from lyra_ray.cli.main import main
from lyra_ray.cli.team_view import amounts, print_teams, team_line


def test_set_without_a_setting_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["team", "set", "vision", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lyra: error: team set: give at least one setting to change (see --help)"]


def test_add_needs_exactly_one_quota() -> None:
    with pytest.raises(SystemExit) as e:
        main(["team", "add", "vision"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["team", "add", "vision", "--quota", "v100=1", "--quota-effective", "2"])


def test_lines_fit_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    team = {
        "name": "vision",
        "quota": {"v100": 4.0, "k80": 8.0},
        "weight": 2.0,
        "borrow_limit": 8.0,
        "lend_limit": 4.0,
        "preemptible": False,
        "members": [f"user-number-{i:03d}" for i in range(40)],
    }
    lines = team_line(team).splitlines()
    assert len(lines) == 2 and all(len(ln) <= 80 for ln in lines), lines
    assert lines[1].endswith("more)")
    assert amounts({"effective": 8.0}, reference="h200") == "8 h200-eq"
    assert amounts(None) == "no limit"
    print_teams([{"name": "default", "guarantee": None, "used": {}, "borrowed": {}, "lent": {}}])
    assert capsys.readouterr().out == ""  # only the unlimited default: no table
