"""Space sharing for jobs the catalogue does not know (#18): a job's owner declares the
share of its speed it keeps beside another (``keep_when_shared``); two such jobs are
offered to packed policies, and the live model replaces each side with what it
measures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lyra_ray.model import JobSpec, JobStatus, JobView
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.model.state import spec_from_dict, spec_to_dict
from lyra_ray.model.throughput import MeasuredThroughputs, SpecThroughputs
from lyra_ray.policies.base import get_policy
from tests.gavel_builders import snapshot


def view(spec: JobSpec) -> JobView:
    return JobView(
        id=spec.name,
        spec=spec,
        arrival_s=0.0,
        status=JobStatus.QUEUED,
        steps_done=0.0,
        attained_service_s=0.0,
        time_received_s={},
        throughput={},
        current=None,
    )


def _spec(name: str, keep: Any = 0.8, workers: int = 1) -> Any:
    raw = {"name": name, "total_steps": 100, "workers": workers, "throughput": {"v100": 4.0}}
    if keep is not None:
        raw["keep_when_shared"] = keep
    return parse_job_spec(raw)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, math.nan, math.inf, "0.5", True, [0.5]])
def test_a_share_outside_0_1_or_not_a_number_is_refused_naming_the_field(bad: Any) -> None:
    with pytest.raises(InputError, match="field 'keep_when_shared'"):
        _spec("a", bad)


def test_the_share_survives_the_state_round_trip() -> None:
    spec = _spec("a", 0.6)
    assert spec.keep_when_shared == 0.6 and _spec("b", 1).keep_when_shared == 1.0
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_two_declaring_jobs_pair_and_a_silent_one_does_not() -> None:
    model = MeasuredThroughputs(SpecThroughputs())
    a, b, c = _spec("a"), _spec("b", 0.7), _spec("c", None)
    assert model.pair_throughput(a, b, "v100") == pytest.approx((3.2, 2.8))
    assert model.pair_throughput(a, c, "v100") is None
    assert model.pair_throughput(a, _spec("d", 0.9, workers=2), "v100") is None  # sizes differ
    packed = get_policy("max_min_fairness_packed")
    same = packed.allocate(snapshot([view(a), view(_spec("e"))], {"v100": 1}, model))
    assert same.fractions["a+e"]["v100"] == pytest.approx(1.0, abs=1e-6), same.fractions
    # unequal shares: max-min gives the side that keeps less a little time alone
    mixed = packed.allocate(snapshot([view(a), view(b)], {"v100": 1}, model))
    assert mixed.fractions["a+b"]["v100"] == pytest.approx(1 / 1.1), mixed.fractions
    assert mixed.fractions["b"]["v100"] == pytest.approx(0.1 / 1.1), mixed.fractions


def test_measured_speeds_replace_the_declared_ones() -> None:
    model = MeasuredThroughputs(SpecThroughputs())
    a, b = _spec("a"), _spec("b", 0.7)
    model.observe(a, "v100", 1, 10.0)  # measured alone: 10 steps/s, not the spec's 4
    assert model.pair_throughput(a, b, "v100") == pytest.approx((8.0, 2.8))
    model.observe_pair(b, a, "v100", 1.0)  # beside a, b keeps far less than it said
    assert model.pair_throughput(a, b, "v100") == pytest.approx((8.0, 1.0))
