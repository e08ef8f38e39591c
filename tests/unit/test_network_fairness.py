"""Max-min fairness by progressive filling: textbook cases, priorities, weights, and the
max-min characterisation on random instances."""

import numpy as np
import pytest

from lyra_ray.network.fairness import max_min


def test_textbook_two_links_three_flows() -> None:
    # Link 0 (cap 1) carries flows 0 and 1, link 1 (cap 2) flows 1 and 2: link 0 fills
    # first at 1/2 each, then flow 2 takes what flow 1 leaves on link 1: 2 - 1/2.
    a = np.array([[1, 1, 0], [0, 1, 1]], float)
    assert max_min(a, np.array([1.0, 2.0])).tolist() == [0.5, 0.5, 1.5]


def test_strict_priority_classes_fill_in_order() -> None:
    a = np.array([[1, 1, 0], [0, 1, 1]], float)
    # Flow 1 (class 0) takes all of link 0, then class 1 gets the rest: flow 0 nothing.
    rates = max_min(a, np.array([1.0, 2.0]), classes=np.array([1, 0, 1]))
    assert rates.tolist() == [0.0, 1.0, 1.0]


def test_caps_release_bandwidth_to_the_others() -> None:
    a = np.array([[1, 1, 0], [0, 1, 1]], float)
    rates = max_min(a, np.array([1.0, 2.0]), caps=np.array([0.2, np.inf, np.inf]))
    assert rates == pytest.approx([0.2, 0.8, 1.2], rel=1e-12)


def test_weights_are_connections() -> None:
    rates = max_min(np.ones((1, 2)), np.array([4.0]), weights=np.array([3.0, 1.0]))
    assert rates.tolist() == [3.0, 1.0]


def test_multiplicity_counts_a_link_crossed_twice() -> None:
    # Flow 0 crosses link 0 twice (a ring's two edges): it can use half the link.
    a = np.array([[2, 1]], float)
    rates = max_min(a, np.array([3.0]))
    assert rates == pytest.approx([1.0, 1.0], rel=1e-12)


def test_flow_on_no_link_is_unlimited_or_capped() -> None:
    a = np.zeros((1, 1))
    assert max_min(a, np.array([1.0]))[0] == np.inf
    assert max_min(a, np.array([1.0]), caps=np.array([5.0]))[0] == 5.0


@pytest.mark.parametrize("seed", range(20))
def test_random_instances_are_max_min_fair(seed: int) -> None:
    """Feasible, and every flow has a bottleneck: a full link on which no flow is faster
    (the definition of max-min fairness)."""
    rng = np.random.default_rng(seed)
    links, flows = rng.integers(2, 8), rng.integers(1, 12)
    a = (rng.random((links, flows)) < 0.4).astype(float)
    a[rng.integers(0, links, flows), np.arange(flows)] = 1.0  # every flow crosses a link
    cap = rng.uniform(0.5, 10.0, links)
    r = max_min(a, cap)
    load = a @ r
    assert np.all(load <= cap * (1 + 1e-9))
    full = load >= cap * (1 - 1e-9)
    for f in range(flows):
        on = np.flatnonzero(a[:, f] > 0)
        assert any(full[k] and r[f] >= r[a[k] > 0].max() * (1 - 1e-9) for k in on), f


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="incidence"):
        max_min(np.ones((2, 2)), np.ones(3))
    with pytest.raises(ValueError, match="capacity"):
        max_min(np.ones((1, 2)), np.array([-1.0]))
    with pytest.raises(ValueError, match="weights"):
        max_min(np.ones((1, 2)), np.ones(1), weights=np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="classes"):
        max_min(np.ones((1, 2)), np.ones(1), classes=np.array([0]))
