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
