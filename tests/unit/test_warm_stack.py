"""The warm max-min model's matrix, written as one CSR, is scipy's block stacking bit for
bit (entries, order, index dtypes, zeros and their signs): HiGHS gets the same model, so
finish-time fairness and water filling solve exactly as before."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.policies.gavel.lp import base_constraints, utility_matrix
from lyra_ray.policies.gavel.warm import stacked, stacked_reference


def _same(a: sp.csc_matrix, b: sp.csc_matrix) -> None:
    assert a.shape == b.shape
    assert a.indptr.dtype == b.indptr.dtype and a.indices.dtype == b.indices.dtype
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)
    assert np.array_equal(np.signbit(a.data), np.signbit(b.data))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 4), st.integers(0, 2**32 - 1), st.booleans())
def test_stacked_equals_scipy_stacking(n: int, k: int, seed: int, pairs: bool) -> None:
    rng = np.random.default_rng(seed)
    sf = rng.integers(1, 5, n).astype(np.float64)
    cap = rng.integers(1, 20, k).astype(np.float64)
    coef = rng.random((n, k)) * (rng.random((n, k)) > 0.3)
    if pairs and n >= 2:  # extra pair columns, as the packed policies build them
        P = int(rng.integers(1, n))
        pr = np.stack([rng.integers(0, n, P), rng.integers(0, n, P)], axis=1)
        A_base, _ = base_constraints(sf, cap, pr, rng.integers(1, 4, P).astype(np.float64))
        U = sp.random(n, A_base.shape[1], density=0.3, random_state=seed % 2**31, format="csr")
    else:
        A_base, _ = base_constraints(sf, cap)
        U = utility_matrix(coef)
    for demand in (np.zeros(n), rng.random(n) * (rng.random(n) > 0.5)):
        s1, a = stacked(U, A_base, demand)
        s2, b = stacked_reference(U, A_base, demand)
        assert s1 == s2
        _same(a, b)
