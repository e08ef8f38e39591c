"""Load patterns: the right shape, reproducible arrivals, and refusal of absurd numbers."""

from __future__ import annotations

import math

import pytest

from lyra_ray.serving.load_pattern import MAX_REQUESTS, LoadPattern


def _diurnal(**overrides: object) -> LoadPattern:
    base: dict[str, object] = {
        "kind": "diurnal",
        "peak_rps": 50.0,
        "duration_s": 120.0,
        "period_s": 60.0,
        "trough_fraction": 0.2,
    }
    base.update(overrides)
    return LoadPattern(**base)  # type: ignore[arg-type]


def test_diurnal_trough_at_zero_and_peak_at_half_period() -> None:
    p = _diurnal()
    assert p.rate_at(0.0) == pytest.approx(10.0)
    assert p.rate_at(30.0) == pytest.approx(50.0)
    assert p.rate_at(60.0) == pytest.approx(10.0)
    grid = [i * 0.1 for i in range(600)]
    assert max(grid, key=p.rate_at) == pytest.approx(30.0)
    assert all(10.0 - 1e-9 <= p.rate_at(t) <= 50.0 + 1e-9 for t in grid)


def test_rate_is_zero_outside_the_run() -> None:
    p = _diurnal()
    assert p.rate_at(-1.0) == 0.0
    assert p.rate_at(120.0) == 0.0


def test_spike_and_constant_shapes() -> None:
    spike = LoadPattern(
        kind="spike",
        peak_rps=40.0,
        duration_s=30.0,
        trough_fraction=0.25,
        spike_at_s=10.0,
        spike_len_s=5.0,
    )
    assert spike.rate_at(9.9) == pytest.approx(10.0)
    assert spike.rate_at(10.0) == pytest.approx(40.0)
    assert spike.rate_at(15.0) == pytest.approx(10.0)
    assert spike.expected_count() == pytest.approx(10.0 * 30 + 30.0 * 5)
    const = LoadPattern(kind="constant", peak_rps=7.0, duration_s=3.0)
    assert const.rate_at(1.5) == 7.0
    assert const.expected_count() == pytest.approx(21.0)


def test_same_seed_same_arrivals_other_seed_other_arrivals() -> None:
    p = _diurnal()
    a = p.arrival_times(seed=11)
    assert a == p.arrival_times(seed=11)
    assert a != p.arrival_times(seed=12)
    assert a == sorted(a)
    assert all(0.0 <= t < p.duration_s for t in a)


def test_expected_count_matches_integral_of_rate() -> None:
    p = _diurnal(duration_s=100.0)  # not a whole number of periods
    steps = 100_000
    dt = p.duration_s / steps
    numeric = sum(p.rate_at((i + 0.5) * dt) for i in range(steps)) * dt
    assert p.expected_count() == pytest.approx(numeric, rel=1e-6)


@pytest.mark.parametrize("kind", ["constant", "diurnal", "spike"])
def test_arrival_count_close_to_integral(kind: str) -> None:
    p = LoadPattern(
        kind=kind,  # type: ignore[arg-type]
        peak_rps=200.0,
        duration_s=120.0,
        period_s=40.0,
        trough_fraction=0.1,
        spike_at_s=30.0,
        spike_len_s=20.0,
    )
    mean = p.expected_count()
    for seed in range(3):
        n = len(p.arrival_times(seed))
        assert abs(n - mean) < 5 * math.sqrt(mean), (seed, n, mean)


def test_arrivals_follow_the_shape() -> None:
    p = _diurnal(peak_rps=200.0, duration_s=60.0, period_s=60.0, trough_fraction=0.0)
    a = p.arrival_times(seed=1)
    near_peak = sum(1 for t in a if 20.0 <= t < 40.0)
    near_trough = sum(1 for t in a if t < 10.0 or t >= 50.0)
    assert near_peak > 5 * near_trough


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kind": "sawtooth"}, "kind"),
        ({"peak_rps": 0.0}, "peak_rps"),
        ({"peak_rps": -5.0}, "peak_rps"),
        ({"peak_rps": float("nan")}, "peak_rps"),
        ({"peak_rps": float("inf")}, "peak_rps"),
        ({"peak_rps": 1e6}, "peak_rps"),
        ({"peak_rps": True}, "peak_rps"),
        ({"duration_s": 0.0}, "duration_s"),
        ({"duration_s": 8 * 24 * 3600.0}, "duration_s"),
        ({"duration_s": float("nan")}, "duration_s"),
        ({"period_s": 0.0}, "period_s"),
        ({"period_s": float("-inf")}, "period_s"),
        ({"trough_fraction": -0.1}, "trough_fraction"),
        ({"trough_fraction": 1.5}, "trough_fraction"),
        ({"trough_fraction": float("nan")}, "trough_fraction"),
        ({"spike_at_s": -1.0}, "spike_at_s"),
        ({"spike_len_s": float("nan")}, "spike_len_s"),
        ({"kind": "spike", "spike_len_s": 0.0}, "spike_len_s"),
        ({"kind": "spike", "spike_len_s": 5.0, "spike_at_s": 500.0}, "spike_at_s"),
    ],
)
def test_bad_numbers_rejected_with_field_named(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _diurnal(**overrides)


def test_too_many_requests_refused_naming_fields() -> None:
    with pytest.raises(ValueError, match=r"peak_rps \* duration_s") as info:
        _diurnal(peak_rps=1e4, duration_s=3600.0)
    assert str(MAX_REQUESTS) in str(info.value)


def test_bad_seed_and_time_rejected() -> None:
    p = _diurnal()
    with pytest.raises(ValueError, match="seed"):
        p.arrival_times(seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="t must be finite"):
        p.rate_at(float("nan"))


def test_to_dict_is_plain() -> None:
    d = _diurnal().to_dict()
    assert d["kind"] == "diurnal"
    assert d["peak_rps"] == 50.0
