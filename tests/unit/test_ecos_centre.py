"""ECOS's constraint matrix written as CSC arrays is the scipy-stacked one, bit for bit
(same entries in the same order, zeros and their signs kept): ECOS then returns the very
same point, so the replays' allocations do not move."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.policies.gavel.ecos_centre import constraint_arrays, constraint_matrix


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
    st.booleans(),
    st.sampled_from([1, 2, 0]),
)
def test_constraint_arrays_equal_the_scipy_matrix(
    n: int, k: int, seed: int, with_need: bool, sf_low: int
) -> None:
    rng = np.random.default_rng(seed)
    T = rng.random((n, k)) * (rng.random((n, k)) > 0.3)  # zeros where a job cannot run
    sf = rng.integers(sf_low, 9, n).astype(np.float64)
    G = constraint_matrix(T, sf, with_need)
    data, indices, indptr = constraint_arrays(T, sf, with_need)
    assert np.array_equal(indptr, G.indptr.astype(np.int64))
    assert np.array_equal(indices, G.indices.astype(np.int64))
    assert data.dtype == G.data.dtype
    assert np.array_equal(data, G.data)
    assert np.array_equal(np.signbit(data), np.signbit(G.data))
