"""A request-rate series as busy inference servers (``--serving-demand FILE@CAPACITY``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.sim.serving import (
    DemandPoint,
    add_series,
    parse_demand_spec,
    read_rate_csv,
    servers_for,
)

RATES = "ts_s,rate_rps,active_clients\n0,100,3\n600,250.5,4\n1200,0,1\n"


def test_rates_become_servers_at_the_stated_capacity(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(RATES)
    pts = read_rate_csv(tmp_path / "r.csv")
    assert [p.rate_rps for p in pts] == [100.0, 250.5, 0.0]
    assert [p.servers for p in servers_for(pts, 50.0)] == [2, 6, 0]  # ceil: never short


def test_several_models_on_one_pool_add_up() -> None:
    a = [DemandPoint(0.0, 2), DemandPoint(600.0, 5)]
    b = [DemandPoint(300.0, 1), DemandPoint(900.0, 0)]
    got = [(p.time_s, p.servers) for p in add_series([a, b])]
    assert got == [(0.0, 2), (300.0, 3), (600.0, 6), (900.0, 5)]


def test_the_flag_takes_a_server_series_or_rate_series_with_capacities(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text(RATES)
    (tmp_path / "s.csv").write_text("time_s,servers\n0,3\n")
    assert [p.servers for p in parse_demand_spec(str(tmp_path / "s.csv"))] == [3]
    both = parse_demand_spec(f"{tmp_path / 'r.csv'}@100,{tmp_path / 'r.csv'}@200")
    assert [p.servers for p in both] == [1 + 1, 3 + 2, 0]
    with pytest.raises(InputError, match="give one server's capacity"):
        parse_demand_spec(str(tmp_path / "r.csv"))
    for cap in ("0", "-5", "nan", "inf", "fast", "1e10"):
        with pytest.raises(InputError, match="--serving-demand: capacity"):
            parse_demand_spec(f"{tmp_path / 'r.csv'}@{cap}")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "header must contain"),
        ("ts,rate\n0,1\n", "header must contain"),
        ("ts_s,rate_rps\n0,lots\n", "line 2: field 'rate_rps': not a number"),
        ("ts_s,rate_rps\n0,-1\n", "line 2: field 'rate_rps': must be a finite"),
        ("ts_s,rate_rps\n0,nan\n", "line 2: field 'rate_rps'"),
        ("ts_s,rate_rps\ninf,1\n", "line 2: field 'ts_s'"),
        ("ts_s,rate_rps\n10,1\n5,1\n", "line 3: field 'ts_s': 5 does not come after 10"),
        ("ts_s,rate_rps\n0,1,2\n", "line 2: expected 2 fields"),
        ("ts_s,rate_rps\n", "no rows"),
    ],
)
def test_a_bad_rate_series_is_refused_naming_file_line_and_field(
    tmp_path: Path, text: str, match: str
) -> None:
    (tmp_path / "r.csv").write_text(text)
    with pytest.raises(InputError, match=match) as e:
        read_rate_csv(tmp_path / "r.csv")
    assert "r.csv" in str(e.value)
