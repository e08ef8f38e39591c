"""The online path estimator: a hand-checkable case, decay following a shift, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.moe_serving.route_estimator import OnlineRouteEstimator, RouteEstimateConfig


def _hand_routes() -> np.ndarray:
    """2 layers, 4 tokens, top-1: layer 0 = [0, 0, 0, 1], layer 1 = [1, 1, 2, 0]."""
    return np.array([[0, 0, 0, 1], [1, 1, 2, 0]], dtype=np.int64)[:, :, None]


def _chain(perm: np.ndarray, first: np.ndarray) -> np.ndarray:
    """2-layer top-1 routes whose layer-1 expert is ``perm`` of the layer-0 expert."""
    return np.stack([first, perm[first]])[:, :, None].astype(np.int64)


def test_hand_checkable_transition_rows_back_off_and_counted_load() -> None:
    est = OnlineRouteEstimator(layers=2, experts=3, history=1, decay=1.0, min_count=1)
    est.observe(_hand_routes())
    # after expert 0: 2 of 3 tokens took 1, 1 took 2; after expert 1: its one token took 0;
    # expert 2 was never seen at layer 0: back off to layer 1's marginal [1, 2, 1] / 4
    picks = est.expected_picks(1, np.array([[0, 1, 2]]))
    np.testing.assert_allclose(picks, [[0, 2 / 3, 1 / 3], [1, 0, 0], [0.25, 0.5, 0.25]])
    np.testing.assert_allclose(est.estimate(1, np.array([[0, 1, 2]])), [1.25, 7 / 6, 7 / 12])
    np.testing.assert_array_equal(est.predict(1, np.array([[0, 1, 2]])), [1, 0, 1])
    np.testing.assert_allclose(est.counted(1, 8), [2, 4, 2])
    # layer 0 has no path: every token gets layer 0's marginal [3, 1, 0] / 4
    np.testing.assert_allclose(est.expected_picks(0, np.zeros((0, 2), int)), [[0.75, 0.25, 0]] * 2)
    # a path seen fewer than min_count times is not trusted
    strict = OnlineRouteEstimator(layers=2, experts=3, history=1, decay=1.0, min_count=2)
    strict.observe(_hand_routes())
    np.testing.assert_allclose(strict.expected_picks(1, np.array([[1]])), [[0.25, 0.5, 0.25]])


def test_every_top_k_pick_counts_and_routes_before_may_carry_k() -> None:
    est = OnlineRouteEstimator(layers=2, experts=4, history=1, decay=1.0, min_count=1)
    routes = np.array([[[0, 3], [1, 2]], [[2, 3], [0, 1]]], dtype=np.int64)  # [2, 2, 2]
    est.observe(routes)
    assert est.picks_per_token(1) == 2.0
    np.testing.assert_allclose(est.estimate(1, routes[:1]), [1, 1, 1, 1])
    np.testing.assert_allclose(est.expected_picks(1, routes[:1]), [[0, 0, 1, 1], [1, 1, 0, 0]])


def test_nothing_observed_is_uniform() -> None:
    est = OnlineRouteEstimator(layers=3, experts=4)
    np.testing.assert_allclose(est.estimate(2, np.zeros((2, 8), int)), [2, 2, 2, 2])
    np.testing.assert_allclose(est.counted(1, 8), [2, 2, 2, 2])


@pytest.mark.parametrize(("decay", "new_share"), [(1.0, 0.2), (0.5, (1 - 0.5**5) / (1 - 0.5**25))])
def test_decay_follows_a_shift_in_the_transitions(decay: float, new_share: float) -> None:
    """20 batches where expert a is followed by old[a], then 5 where it is followed by new[a]:
    without decay the new successor holds 5 / 25 of the row; with decay 0.5 it holds
    sum(0.5^0..4) / sum(0.5^0..24) = (1 - 0.5^5) / (1 - 0.5^25) ~ 0.969."""
    rng = np.random.default_rng(0)
    old, new = np.array([1, 2, 3, 0]), np.array([3, 0, 1, 2])
    est = OnlineRouteEstimator(layers=2, experts=4, history=1, decay=decay, min_count=1)
    first = np.repeat(np.arange(4), 25)  # the same 25 tokens per expert in every batch
    for _ in range(20):
        est.observe(_chain(old, rng.permutation(first)))
    for _ in range(5):
        est.observe(_chain(new, rng.permutation(first)))
    rows = est.expected_picks(1, np.arange(4)[None])
    np.testing.assert_allclose(rows[np.arange(4), new], new_share, rtol=1e-9)
    np.testing.assert_allclose(rows[np.arange(4), old], 1 - new_share, rtol=1e-9)
    if decay < 1:
        assert np.array_equal(est.predict(1, np.arange(4)[None]), new)


def test_the_path_estimate_sees_a_batch_the_counted_load_does_not() -> None:
    """On deterministic paths, a batch whose layer-0 mix differs from the past is estimated
    exactly from its paths, while the counted load repeats the past mix."""
    perm = np.array([2, 0, 3, 1])
    est = OnlineRouteEstimator(layers=2, experts=4, history=1, decay=0.9, min_count=1)
    est.observe(_chain(perm, np.repeat(np.arange(4), 10)))  # balanced past
    batch = _chain(perm, np.array([0] * 30 + [1] * 10))  # skewed to expert 0 -> 2
    actual = np.bincount(batch[1, :, 0], minlength=4)
    np.testing.assert_allclose(est.estimate(1, batch[:1]), actual)
    np.testing.assert_allclose(est.counted(1, 40), [10, 10, 10, 10])


def test_longer_paths_condition_on_more_layers() -> None:
    # layer 2's expert is layer 0's expert; layer 1 is always 0, so only history 2 sees it
    routes = np.array([[0, 1, 2, 0, 1, 2], [0] * 6, [0, 1, 2, 0, 1, 2]])[:, :, None]
    one = OnlineRouteEstimator(layers=3, experts=3, history=1, decay=1.0, min_count=1)
    two = OnlineRouteEstimator(layers=3, experts=3, history=2, decay=1.0, min_count=1)
    for est in (one, two):
        est.observe(routes)
    probe = np.array([[2], [0]])
    np.testing.assert_allclose(two.expected_picks(2, probe), [[0, 0, 1]])
    np.testing.assert_allclose(one.expected_picks(2, probe), [[1 / 3, 1 / 3, 1 / 3]])


@pytest.mark.parametrize(
    ("routes", "match"),
    [
        (np.zeros((2, 5), int), r"routes must be \[layers=2, tokens, k\]"),
        (np.zeros((3, 5, 1), int), r"routes must be \[layers=2, tokens, k\]"),
        (np.full((2, 5, 1), np.nan), "routes must hold expert ids, found NaN"),
        (np.full((2, 5, 1), 1.5), "routes must hold integer expert ids"),
        (np.full((2, 5, 1), 3), r"routes must hold expert ids in \[0, 3\)"),
        (np.full((2, 5, 1), -1), r"routes must hold expert ids in \[0, 3\)"),
        (np.full((2, 5, 1), "a"), "routes must hold integer expert ids"),
    ],
)
def test_bad_routes_name_the_field(routes: np.ndarray, match: str) -> None:
    est = OnlineRouteEstimator(layers=2, experts=3)
    with pytest.raises(ValueError, match=match):
        est.observe(routes)
    assert est.seen[0].sum() == 0  # nothing was folded in


def test_bad_query_and_parameters_name_the_field() -> None:
    est = OnlineRouteEstimator(layers=3, experts=3)
    with pytest.raises(ValueError, match=r"routes_before must be \[layer=2, tokens\]"):
        est.estimate(2, np.zeros((1, 4), int))
    with pytest.raises(ValueError, match="routes_before must hold expert ids, found NaN"):
        est.estimate(1, np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 3\)"):
        est.estimate(3, np.zeros((3, 4), int))
    with pytest.raises(ValueError, match="tokens must be >= 0"):
        est.counted(1, -1)
    with pytest.raises(ValueError, match="decay must be in"):
        OnlineRouteEstimator(layers=2, experts=3, decay=0.0)
    with pytest.raises(ValueError, match="decay must be in"):
        OnlineRouteEstimator(layers=2, experts=3, decay=float("nan"))
    with pytest.raises(ValueError, match="history must be an integer >= 0"):
        OnlineRouteEstimator(layers=2, experts=3, history=-1)
    with pytest.raises(ValueError, match="min_count must be a finite number"):
        OnlineRouteEstimator(layers=2, experts=3, min_count=float("nan"))
    with pytest.raises(ValueError, match="history: experts\\*\\*history"):
        OnlineRouteEstimator(layers=2, experts=256, history=4)
    with pytest.raises(ValueError, match=r"layers \(0\) and experts \(3\)"):
        OnlineRouteEstimator(layers=0, experts=3)


def test_config_checks_its_fields() -> None:
    cfg = RouteEstimateConfig()
    assert not hasattr(cfg, "enabled")  # no switch: the live service does not use it
    est = OnlineRouteEstimator.from_config(4, 8, cfg)
    assert (est.history, est.decay, est.min_count) == (cfg.history, cfg.decay, cfg.min_count)
    with pytest.raises(ValueError, match="decay must be in"):
        RouteEstimateConfig(decay=1.5)
    with pytest.raises(ValueError, match="history must be an integer"):
        RouteEstimateConfig(history=True)
