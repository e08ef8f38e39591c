"""The serving-demand estimator: steady under noise, quick up, slow down, resumable."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys

import pytest

from lyra_ray.serving.demand import DemandConfig, DemandEstimator, total_demand


def _config(**overrides: object) -> DemandConfig:
    base: dict[str, object] = {
        "target_ongoing_per_replica": 2.0,
        "replicas_per_server": 1,
        "smoothing_s": 10.0,
        "up_after_s": 5.0,
        "down_after_s": 60.0,
        "down_margin": 0.1,
        "min_servers": 1,
        "max_servers": 8,
    }
    base.update(overrides)
    return DemandConfig(**base)  # type: ignore[arg-type]


def _feed(est: DemandEstimator, start: float, end: float, ongoing: float) -> list[int]:
    """One sample a second over [start, end)."""
    return [est.update(float(t), ongoing, None) for t in range(int(start), int(end))]


def test_noise_around_a_level_does_not_flap() -> None:
    est = DemandEstimator(_config(), initial_servers=3)
    rng = random.Random(7)
    # The need hovers at 2.5 servers (ongoing 5 / 2 per replica), so its raw ceiling flips.
    samples = [max(0.0, 5.0 + rng.gauss(0, 1.0)) for _ in range(600)]
    raw = [math.ceil(x / 2.0) for x in samples]
    levels = [est.update(float(t), x, None) for t, x in enumerate(samples)]
    assert sum(1 for a, b in itertools.pairwise(raw) if a != b) > 50
    assert set(levels) == {3}


def test_single_burst_does_not_raise() -> None:
    est = DemandEstimator(_config(up_after_s=0.0), initial_servers=2)
    _feed(est, 0, 60, 3.0)  # 1.5 servers -> level stays 2 (down needs 60 s of < 1.8)
    # One scrape at five servers' worth: the EWMA (10 s constant) keeps it under 2 servers.
    assert est.update(60.0, 10.0, None) == 2
    assert _feed(est, 61, 70, 3.0) == [2] * 9


def test_sustained_rise_raises_within_up_after_s() -> None:
    cfg = _config(up_after_s=5.0)
    est = DemandEstimator(cfg, initial_servers=1)
    _feed(est, 0, 30, 1.0)
    assert est.level == 1
    levels = _feed(est, 30, 37, 16.0)  # 8 servers' worth from t=30
    # The smoothed need passes the level at the first sample (t=30); raised by t=35.
    assert levels[:5] == [1] * 5
    assert levels[5] > 1
    # and it keeps climbing to the full need while the load stays.
    _feed(est, 37, 200, 16.0)
    assert est.level == 8


def test_up_after_zero_raises_at_once() -> None:
    est = DemandEstimator(_config(up_after_s=0.0, smoothing_s=1.0), initial_servers=1)
    est.update(0.0, 2.0, None)
    assert est.update(5.0, 8.0, None) == 4


def test_fall_lowers_only_after_down_after_s() -> None:
    cfg = _config(down_after_s=60.0, smoothing_s=5.0)
    est = DemandEstimator(cfg, initial_servers=4)
    _feed(est, 0, 30, 8.0)  # exactly 4 servers
    assert est.level == 4
    levels = _feed(est, 30, 200, 1.0)  # half a server's worth from t=30
    first_drop = next(i for i, lv in enumerate(levels) if lv < 4) + 30
    assert first_drop >= 30 + 60
    assert est.level == 1


def test_wavering_fall_goes_down_to_the_window_peak() -> None:
    cfg = _config(down_after_s=20.0, smoothing_s=0.5, down_margin=0.0)
    est = DemandEstimator(cfg, initial_servers=6)
    for t in range(30):
        est.update(float(t), 2.0 if t % 2 else 6.0, None)  # wavers between 1 and 3 servers
    assert est.level == 3


def test_never_below_min_servers_and_never_above_max() -> None:
    est = DemandEstimator(_config(min_servers=2, max_servers=5, down_after_s=1.0))
    assert est.level == 5  # nothing lent before the service was watched
    _feed(est, 0, 300, 0.0)
    assert est.level == 2
    _feed(est, 300, 600, 1000.0)
    assert est.level == 5


def test_rate_target_wins_when_larger() -> None:
    cfg = _config(target_rps_per_replica=10.0, up_after_s=0.0, replicas_per_server=2)
    est = DemandEstimator(cfg, initial_servers=1)
    # ongoing says 2 replicas (1 server); rate says 60 rps / 10 = 6 replicas = 3 servers.
    assert est.update(0.0, 4.0, 60.0) == 3
    assert est.need_servers == pytest.approx(3.0)


def test_rate_ignored_without_rate_target_and_none_keeps_last() -> None:
    est = DemandEstimator(_config(up_after_s=0.0), initial_servers=1)
    assert est.update(0.0, None, 500.0) == 1
    assert est.need_servers is None
    est.update(1.0, 6.0, None)
    assert est.level == 3
    assert est.update(2.0, None, None) == 3


def test_state_round_trip_gives_identical_outputs() -> None:
    cfg = _config(down_after_s=30.0)
    rng = random.Random(3)
    samples = [
        (float(t), max(0.0, 6.0 + 5.0 * math.sin(t / 40.0) + rng.gauss(0, 1)), None)
        for t in range(400)
    ]
    whole = DemandEstimator(cfg, initial_servers=2)
    expected = [whole.update(*s) for s in samples]

    first = DemandEstimator(cfg, initial_servers=2)
    got = [first.update(*s) for s in samples[:173]]
    saved = json.loads(json.dumps(first.to_state(), allow_nan=False))
    resumed = DemandEstimator.from_state(cfg, saved)
    got += [resumed.update(*s) for s in samples[173:]]
    assert got == expected
    assert resumed.to_state() == whole.to_state()


def test_from_state_clamps_level_to_new_config() -> None:
    est = DemandEstimator(_config(max_servers=8))
    est.update(0.0, 1.0, None)
    resumed = DemandEstimator.from_state(_config(max_servers=4), est.to_state())
    assert resumed.level == 4


@pytest.mark.parametrize(
    ("key", "value"),
    [("level", 0), ("last_t", float("nan")), ("rps_avg", -1.0), ("version", 99)],
)
def test_from_state_refuses_bad_state(key: str, value: object) -> None:
    est = DemandEstimator(_config())
    est.update(0.0, 1.0, 1.0)
    state: dict[str, object] = dict(est.to_state())
    state[key] = value
    with pytest.raises(ValueError, match=f"state.{key}"):
        DemandEstimator.from_state(_config(), state)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((float("nan"), 1.0, 1.0), "t_s"),
        ((5.0, 1.0, 1.0), "t_s"),  # backwards: the last sample was at t=10
        ((11.0, float("inf"), 1.0), "ongoing_requests"),
        ((11.0, -1.0, 1.0), "ongoing_requests"),
        ((11.0, 1.0, float("nan")), "requests_per_s"),
        ((11.0, 1.0, -0.5), "requests_per_s"),
        ((-1.0, 1.0, 1.0), "t_s"),
    ],
)
def test_bad_sample_names_field_and_leaves_state(
    args: tuple[float, float, float], field: str
) -> None:
    est = DemandEstimator(_config(target_rps_per_replica=5.0))
    est.update(0.0, 3.0, 2.0)
    est.update(10.0, 4.0, 3.0)
    before = est.to_state()
    with pytest.raises(ValueError, match=field):
        est.update(*args)
    assert est.to_state() == before


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"target_ongoing_per_replica": 0.0}, "target_ongoing_per_replica"),
        ({"target_ongoing_per_replica": float("nan")}, "target_ongoing_per_replica"),
        ({"target_rps_per_replica": -1.0}, "target_rps_per_replica"),
        ({"replicas_per_server": 0}, "replicas_per_server"),
        ({"replicas_per_server": 1.5}, "replicas_per_server"),
        ({"smoothing_s": 0.0}, "smoothing_s"),
        ({"smoothing_s": float("inf")}, "smoothing_s"),
        ({"up_after_s": -1.0}, "up_after_s"),
        ({"down_after_s": float("nan")}, "down_after_s"),
        ({"down_margin": 1.0}, "down_margin"),
        ({"min_servers": 0}, "min_servers"),
        ({"max_servers": 0}, "max_servers"),
        ({"min_servers": 3, "max_servers": 2}, "max_servers"),
    ],
)
def test_bad_config_names_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _config(**overrides)


def test_initial_servers_checked() -> None:
    with pytest.raises(ValueError, match="initial_servers"):
        DemandEstimator(_config(min_servers=2), initial_servers=1)
    with pytest.raises(ValueError, match="initial_servers"):
        DemandEstimator(_config(max_servers=3), initial_servers=4)


def test_total_demand() -> None:
    assert total_demand({"chat": 3, "embed": 1}) == 4
    assert total_demand({}) == 0
    with pytest.raises(ValueError, match="embed"):
        total_demand({"chat": 3, "embed": -1})


def test_pure_modules_do_not_import_ray() -> None:
    code = (
        "import sys\n"
        "import lyra_ray.serving.demand, lyra_ray.serving.load_pattern\n"
        "assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')]\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_a_level_lent_down_to_keeps_the_margin_below_it() -> None:
    """Falling from 3 to 2 takes a need at most 2 x 0.9 = 1.8 servers, not 1.99, so a need
    wavering around 2 (a drain moving load onto the servers left) holds the level at 3
    instead of lending and reclaiming a server on every swing; once the need is at most
    1.8 the level falls, and then only a need past 2 raises it again."""
    cfg = _config(up_after_s=0.0, smoothing_s=0.5, down_after_s=4.0)  # 2 in flight a server
    est = DemandEstimator(cfg, initial_servers=3)
    levels = [est.update(float(t), 3.9 if t % 12 < 6 else 4.05, None) for t in range(120)]
    assert set(levels) == {3}  # 1.95-2.03 servers: never lent, so never reclaimed
    assert _feed(est, 120, 130, 3.5)[-1] == 2  # 1.75 servers for 4 s: down to 2
    assert _feed(est, 130, 160, 3.9) == [2] * 30  # 1.95: below 2, stays
    assert _feed(est, 160, 163, 4.4)[-1] == 3  # 2.2: up at once
