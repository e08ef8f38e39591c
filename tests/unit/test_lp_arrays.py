"""Arrays written by hand for speed equal, bit for bit, what the slower path builds.

A replay solves thousands of small LPs, so their matrices are written as CSR arrays
directly instead of through scipy's COO-to-CSR conversion, the ECOS matrix's constant
part is kept per sparsity pattern, and the report's median and 95th percentile are
computed without numpy's masked-array import. Every simulated JCT depends on these
being the same numbers, so each is checked against the reference here.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lyra_ray.policies.gavel import ecos_las
from lyra_ray.policies.gavel.ecos_las import solve_las_ecos
from lyra_ray.policies.gavel.lp import base_constraints, utility_matrix
from lyra_ray.sim.metrics import _stats


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return (
        a.shape == b.shape
        and a.indptr.dtype == b.indptr.dtype
        and a.indices.dtype == b.indices.dtype
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and a.data.tobytes() == b.data.tobytes()
    )


def _coo_base(sf: np.ndarray, cap: np.ndarray, n_extra: int) -> sp.csr_matrix:
    n, k = sf.shape[0], cap.shape[0]
    jk = np.arange(n * k)
    rows = np.concatenate([jk // k, n + (jk % k)])
    cols = np.concatenate([jk, jk])
    vals = np.concatenate([np.ones(n * k), np.repeat(sf, k)])
    return sp.csr_matrix((vals, (rows, cols)), shape=(n + k, n * k + n_extra))


@pytest.mark.parametrize("seed", range(8))
def test_constraint_and_utility_matrices_match_scipy_coo(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n, k, extra = int(rng.integers(1, 70)), int(rng.integers(1, 5)), int(rng.integers(0, 3))
        sf = rng.choice([1.0, 2.0, 4.0, 8.0], size=n)
        cap = rng.integers(0, 40, size=k).astype(np.float64)
        A, b = base_constraints(sf, cap, n_extra=extra)
        ref = _coo_base(sf, cap, extra)
        assert _same(A, ref) and _same(A.tocsc(), ref.tocsc())
        assert b.tobytes() == np.concatenate([np.ones(n), cap]).tobytes()
        coef = rng.random((n, k)) * (rng.random((n, k)) > 0.3)
        U = utility_matrix(coef, extra)
        rows, cols = np.repeat(np.arange(n), k), np.arange(n * k)
        ref_u = sp.csr_matrix((coef.ravel(), (rows, cols)), shape=(n, n * k + extra))
        assert _same(U, ref_u) and _same(U.tocsc(), ref_u.tocsc())


def test_ecos_answer_is_the_same_from_the_kept_pattern() -> None:
    """A solve over a kept pattern answers as one that built the pattern afresh."""
    rng = np.random.default_rng(3)
    runnable = rng.random((12, 3)) > 0.2
    coef = rng.random((12, 3)) * runnable
    sf = rng.choice([1.0, 2.0], size=12)
    cap = np.array([6.0, 5.0, 4.0])
    ecos_las._STRUCTURES.clear()
    first = solve_las_ecos(coef, sf, cap, runnable)
    assert ecos_las._STRUCTURES
    again = solve_las_ecos(coef.copy(), sf.copy(), cap.copy(), runnable.copy())
    for x, y in zip(first[::2], again[::2], strict=True):
        assert x.tobytes() == y.tobytes()
    assert first[1] == again[1]


@pytest.mark.parametrize("n", [*range(1, 40), 99, 100, 500, 501])
def test_report_median_and_p95_are_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    for values in (rng.exponential(1e4, n), rng.integers(0, 30, n).astype(np.float64)):
        got = _stats(values.tolist(), "jct")
        assert got["median_jct_s"] == float(np.median(values))
        assert got["p95_jct_s"] == float(np.percentile(values, 95))
