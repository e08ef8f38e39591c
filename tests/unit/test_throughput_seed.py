"""A profiled throughput table seeds the scheduler (#28): measured over predicted over
estimated, a user's job found again by its ``profile`` key, bad tables refused naming the
field, and the table kept by the store for a restart."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.model.throughput import (
    MeasuredThroughputs,
    catalogue_throughputs,
    load_gavel_throughputs,
    parse_gavel_throughputs,
)
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.runtime.store import StateStore


def _table(**extra: object) -> dict[str, object]:
    return {
        "v100": {
            "('mine', 1)": {"null": 10.0, "('resnet18', 1)": [4.0, 7.0], "('mine', 1)": [5.0, 5.0]},
            "('resnet18', 1)": {"null": 20.0, "('mine', 1)": [7.0, 4.0]},
        },
        **extra,
    }


def test_a_profiled_user_job_is_found_by_its_profile_key() -> None:
    model = catalogue_throughputs().overlay(parse_gavel_throughputs(_table(), "t"))
    spec = parse_job_spec(
        {"name": "j", "total_steps": 10, "profile": "mine", "entrypoint": "m:f"},
        known_job_types=model.job_types,
    )
    assert spec.job_type == "mine"
    assert model.throughput(spec, "v100", 1) == 10.0
    other = parse_job_spec({"name": "k", "total_steps": 10, "job_type": "resnet18"})
    assert model.pair_throughput(spec, other, "v100") == (4.0, 7.0)
    # the table's rate alone replaces the catalogue's estimate; other types stay
    assert model.throughput(other, "v100", 1) == 20.0
    assert model.throughput(other, "k80", 1) == catalogue_throughputs().throughput(other, "k80", 1)


def test_an_unknown_profile_entry_is_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match="field 'profile'"):
        parse_job_spec(
            {"name": "j", "total_steps": 10, "profile": "nope"}, known_job_types={"mine"}
        )
    with pytest.raises(InputError, match="'profile' or 'job_type'"):
        parse_job_spec({"name": "j", "total_steps": 10, "profile": "a", "job_type": "b"})
    with pytest.raises(InputError, match="field 'profile'"):
        parse_job_spec({"name": "j", "total_steps": 10, "profile": ""})


def test_measured_beats_predicted_beats_estimated() -> None:
    base = catalogue_throughputs()  # v100 pairs are estimates
    predicted = _table(predicted=[["v100", "('mine', 1)", "('resnet18', 1)"]])
    top = parse_gavel_throughputs(predicted, "t")
    merged = base.overlay(top)
    key = ("v100", ("mine", 1), ("resnet18", 1))
    assert merged.pair_rank(*key) == 1 and key in merged.predicted
    # a predicted entry does not hide a measured one underneath
    measured = parse_gavel_throughputs(_table(), "m")
    again = measured.overlay(
        parse_gavel_throughputs(
            {
                "v100": {"('mine', 1)": {"null": 10.0, "('resnet18', 1)": [1.0, 1.0]}},
                "predicted": [["v100", "('mine', 1)", "('resnet18', 1)"]],
            },
            "p",
        )
    )
    assert again.pairs[("mine", 1)]["v100"][("resnet18", 1)] == (4.0, 7.0)
    assert again.pair_rank(*key) == 2
    # the live model's own measurement beats them all
    live = MeasuredThroughputs(merged)
    a = parse_job_spec({"name": "a", "total_steps": 1, "profile": "mine"})
    b = parse_job_spec({"name": "b", "total_steps": 1, "job_type": "resnet18"})
    live.observe_pair(a, b, "v100", 3.0)
    assert live.pair_throughput(a, b, "v100") == (3.0, 7.0)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"predicted": "x"}, "predicted"),
        ({"predicted": [["v100", "mine"]]}, "predicted[0]"),
        ({"predicted": [[1, "('a', 1)", "('b', 1)"]]}, "predicted[0]"),
        ({"spread": {"v100": {"('mine', 1)": {"null": math.inf}}}}, "spread.v100"),
        ({"spread": {"v100": {"('mine', 1)": {"null": -1}}}}, "spread.v100"),
        ({"spread": []}, "spread"),
    ],
)
def test_bad_extra_keys_are_refused_naming_them(extra: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=re.escape(f"field '{field}")):
        parse_gavel_throughputs(_table(**extra), "t")


def test_the_config_reads_a_path_and_refuses_a_bad_table(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text(json.dumps(_table()))
    cfg = SchedulerConfig.from_dict({"throughputs": str(f)})
    assert cfg.throughputs == _table() and cfg.throughput_table() is not None
    with pytest.raises(InputError, match="field 'throughputs'"):
        SchedulerConfig.from_dict({"throughputs": str(tmp_path / "missing.json")})
    with pytest.raises(InputError, match="field 'throughputs'"):
        SchedulerConfig.from_dict({"throughputs": {"v100": {"('a', 1)": {"null": "x"}}}})
    with pytest.raises(InputError, match="field 'throughputs'"):
        SchedulerConfig.from_dict({"throughputs": 3})
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(InputError, match="field 'throughputs'"):
        SchedulerConfig.from_dict({"throughputs": str(tmp_path / "empty.json")})


def test_the_store_keeps_the_seed_apart_from_the_state(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    assert store.seed() is None
    store.save_seed(_table())
    store.close()
    again = StateStore(tmp_path)
    assert again.seed() == _table() and again.load() is None


def test_a_profile_file_loads_and_lists_what_was_predicted(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            _table(
                predicted=[["v100", "('mine', 1)", "('mine', 1)"]],
                provenance={"source": "lyra profile"},
            )
        )
    )
    model = load_gavel_throughputs(f)
    assert model.predicted == {("v100", ("mine", 1), ("mine", 1))}
