"""The phase-2 knapsack is exact: it equals enumeration on small random instances."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.policies.lyra import mckp

items = st.lists(
    st.tuples(st.integers(0, 6), st.floats(-2.0, 20.0, allow_nan=False, width=32)),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(groups=st.lists(items, max_size=5), capacity=st.integers(0, 12))
def test_dp_equals_brute_force(groups: list[list[tuple[int, float]]], capacity: int) -> None:
    sol = mckp.solve(groups, capacity)
    assert sol.value == pytest.approx(mckp.brute_force(groups, capacity), abs=1e-6)
    # The reported choice is feasible and worth what the solver says.
    weight = sum(groups[g][c][0] for g, c in enumerate(sol.choice) if c is not None)
    value = sum(groups[g][c][1] for g, c in enumerate(sol.choice) if c is not None)
    assert weight <= capacity
    assert weight == sol.weight
    assert value == pytest.approx(sol.value, abs=1e-6)


def test_one_item_per_group_even_when_two_would_fit() -> None:
    # Two cheap items in one group must not be combined.
    sol = mckp.solve([[(1, 5.0), (2, 6.0)]], 3)
    assert sol.value == pytest.approx(6.0)
    assert sol.choice == (1,)


def test_non_concave_values_beat_greedy_density() -> None:
    # Density-greedy takes group 0's item (density 3) and then cannot fit group 1's.
    groups = [[(1, 3.0)], [(3, 7.0)]]
    assert mckp.solve(groups, 3).value == pytest.approx(7.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        mckp.solve([], -1)
    with pytest.raises(ValueError, match="group 0"):
        mckp.solve([[(-1, 1.0)]], 3)
