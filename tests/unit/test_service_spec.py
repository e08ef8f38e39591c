"""An inference service is checked at the boundary: every refusal names the field."""

from __future__ import annotations

import math

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.serving.spec import parse_service_spec


def test_a_good_spec_gets_its_defaults() -> None:
    spec = parse_service_spec({"name": "dense"})
    assert spec.model == "dense" and spec.http_route == "/dense"
    assert spec.min_servers == 1  # never 0: a Serve app with no replica makes requests hang
    assert parse_service_spec(spec.to_dict()) == parse_service_spec(
        {**spec.to_dict(), "route": "/dense"}
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"name": "Bad Name"}, "'name'"),
        ({"name": ""}, "'name'"),
        ({"model": "dense"}, "'name'"),
        ({"name": "a", "model": "gpt"}, "'model'"),
        ({"name": "a", "route": "no-slash"}, "'route'"),
        ({"name": "a", "target_ongoing_per_replica": 0}, "'target_ongoing_per_replica'"),
        ({"name": "a", "target_ongoing_per_replica": math.nan}, "'target_ongoing_per_replica'"),
        ({"name": "a", "target_ongoing_per_replica": math.inf}, "'target_ongoing_per_replica'"),
        ({"name": "a", "target_ongoing_per_replica": "2"}, "'target_ongoing_per_replica'"),
        ({"name": "a", "min_servers": 0}, "'min_servers'"),
        ({"name": "a", "min_servers": 1.5}, "'min_servers'"),
        ({"name": "a", "replicas_per_server": -1}, "'replicas_per_server'"),
        ({"name": "a", "replicas_per_server": 10**9}, "'replicas_per_server'"),
        ({"name": "a", "smoothing_s": 0}, "'smoothing_s'"),
        ({"name": "a", "down_after_s": -1}, "'down_after_s'"),
        ({"name": "a", "down_after_s": 1e300}, "'down_after_s'"),
        ({"name": "a", "config": {"service_ms": math.nan}}, "'config.service_ms'"),
        ({"name": "a", "config": []}, "'config'"),
        ({"name": "a", "replicas": 3}, "unknown field"),
    ],
)
def test_bad_input_names_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        parse_service_spec(raw)


def test_not_a_mapping() -> None:
    with pytest.raises(InputError, match="mapping"):
        parse_service_spec(["name", "a"])


def test_model_knobs_are_checked_by_model() -> None:
    from lyra_ray.serving.spec import moe_knobs

    spec = parse_service_spec({"name": "m", "model": "moe", "config": {"experts": 8, "slots": 4}})
    assert moe_knobs(spec.config)["experts"] == 8 and moe_knobs(spec.config)["layers"] == 2
    bad = [
        ({"model": "moe", "config": {"hidden_size": 3}}, "'config.hidden_size'.*not a knob"),
        ({"model": "dense", "config": {"experts": 3}}, "'config.experts'.*not a knob"),
        ({"model": "moe", "config": {"experts": 2.5}}, "'config.experts'.*integer"),
        ({"model": "moe", "config": {"slots": 0}}, "'config.slots'.*must be in"),
        ({"model": "moe", "config": {"top_k": 5, "experts": 4}}, "'config.top_k'"),
        ({"model": "moe", "config": {"dim": 33}}, "'config.dim'.*multiple of 4"),
        ({"model": "moe", "config": {"threshold": float("inf")}}, "'config.threshold'"),
        ({"model": "dense", "config": {"service_ms": True}}, "'config.service_ms'"),
    ]
    for extra, match in bad:
        with pytest.raises(InputError, match=match):
            parse_service_spec({"name": "m", **extra})


def test_a_moe_service_must_fit_every_layer_on_one_server() -> None:
    from lyra_ray.model import Node
    from lyra_ray.serving.capacity import check_fits

    nodes = {"n1": Node("n1", "t4", 2, pool="inference")}
    ok = parse_service_spec({"name": "m", "model": "moe", "config": {"experts": 6, "slots": 3}})
    check_fits(ok, {}, nodes)  # 2 GPUs x 3 slots hold 6 experts
    tight = parse_service_spec({"name": "m", "model": "moe", "config": {"experts": 7, "slots": 3}})
    with pytest.raises(InputError, match=r"'config\.slots'"):
        check_fits(tight, {}, nodes)


def test_every_example_service_file_parses() -> None:
    from pathlib import Path

    import yaml

    files = sorted((Path(__file__).parents[2] / "jobs" / "examples").glob("*-service.yaml"))
    assert {f.name for f in files} >= {"dense-service.yaml", "moe-service.yaml"}
    for f in files:
        spec = parse_service_spec(yaml.safe_load(f.read_text()))
        assert spec.name and spec.model in ("dense", "moe"), f
