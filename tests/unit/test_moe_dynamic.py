"""Per-request borrowing (Lina's per-batch side): how one request's chunks are placed."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.moe_serving.bottleneck import request_ideal
from lyra_ray.moe_serving.dynamic import chunk_hosts, request_chunks, static_hosts


def _best_max_load(tokens: np.ndarray, budget: int) -> float:
    """Brute force: the smallest possible max tokens-per-chunk over all chunk counts."""
    active = [int(n) for n in tokens if n > 0]
    best = np.inf
    for combo in itertools.product(range(1, budget + 1), repeat=len(active)):
        if sum(combo) <= budget and all(c <= n for c, n in zip(combo, active, strict=True)):
            best = min(best, max(n / c for n, c in zip(active, combo, strict=True)))
    return float(best)


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 40), min_size=2, max_size=4),
    extra=st.integers(0, 5),
)
def test_request_chunks_is_optimal_and_respects_bounds(tokens: list[int], extra: int) -> None:
    t = np.array(tokens, dtype=np.int64)
    budget = int((t > 0).sum()) + extra
    c = request_chunks(t, budget)
    assert np.all(c[t == 0] == 0)
    assert np.all(c[t > 0] >= 1) and np.all(c <= t)
    assert c.sum() == min(budget, t.sum())
    if t.sum():
        mine = float(np.max(np.where(c > 0, t / np.maximum(c, 1), 0.0)))
        assert mine == pytest.approx(_best_max_load(t, budget))


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 300), min_size=4, max_size=4),
    home=st.lists(st.integers(1, 4), min_size=4, max_size=4),
)
def test_no_expert_hosts_more_chunks_than_it_has_replicas(
    tokens: list[int], home: list[int]
) -> None:
    """Each replica gets at most one chunk of a request, as under the static split."""
    t, h = np.array(tokens, dtype=np.int64), np.array(home, dtype=np.int64)
    hosts = chunk_hosts(t, h)
    want = request_chunks(t, int(h.sum()))
    assert [len(x) for x in hosts] == want.tolist()
    used = np.bincount([f for x in hosts for f in x], minlength=4)
    assert np.all(used <= h)
    for e, x in enumerate(hosts):  # own replicas first, then borrowed ones
        own = min(int(want[e]), int(h[e]))
        assert x[:own] == [e] * own and e not in x[own:]


def test_a_request_that_matches_the_plan_borrows_nothing() -> None:
    home = np.array([4, 2, 1, 1])
    assert chunk_hosts(np.array([400, 200, 100, 100]), home) == static_hosts(
        np.array([400, 200, 100, 100]), home
    )


def test_a_cold_expert_hot_in_this_request_borrows_the_idlest_replicas() -> None:
    home = np.array([4, 2, 1, 1])
    hosts = chunk_hosts(np.array([40, 20, 400, 10]), home)
    assert hosts[2][0] == 2 and len(hosts[2]) == 5
    assert sorted(hosts[2][1:]) == [0, 0, 0, 1]  # expert 0 and 1 lend what they leave idle
    assert hosts[3] == [3]


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="tokens"):
        request_chunks(np.array([-1, 3]), 4)
    with pytest.raises(ValueError, match="budget"):
        request_chunks(np.array([1, 1, 1]), 2)
    with pytest.raises(ValueError, match="home"):
        chunk_hosts(np.array([1, 1]), np.array([0, 2]))


def test_borrowing_lifts_the_unloaded_tail_of_skewed_requests() -> None:
    """Requests mostly for an expert the plan gave one replica: borrowing removes that tail."""
    rng = np.random.default_rng(0)
    per_request = np.stack(
        [rng.multinomial(512, rng.dirichlet(np.full(4, 0.5)))[None] for _ in range(200)]
    ).astype(np.float64)
    uniform = np.full((1, 4), 2, dtype=np.int64)
    lina = np.array([[4, 2, 1, 1]], dtype=np.int64)
    r = request_ideal(per_request, uniform, lina, fixed_s=0.16, per_token_s=0.012)
    assert r["borrow"]["p95"] > r["p95"]
    assert r["borrow"]["p95"] > 1.5  # every request now spreads over all 8 replicas


def test_bench_refuses_an_unwritable_json_path_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.moe_serving import main

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    rc = main(["--json", str(blocker / "out.json")])
    assert rc == 2
    assert "--json" in capsys.readouterr().err
