"""An elastic job's range from its profile (docs/lyra.md, "What an elastic job is")."""

from __future__ import annotations

import pytest

from lyra_ray.model.elastic_range import (
    doubling_range,
    max_on_curve,
    min_workers,
    profile_range,
)


def test_the_minimum_holds_the_batch_at_the_largest_local_batch() -> None:
    assert min_workers(6400, 200) == 32
    assert min_workers(2048, 1024) == 2
    assert min_workers(100, 1024) == 1
    # a job that asked for fewer already accepts accumulation: its request is its minimum
    assert min_workers(384, 12, requested=8) == 8
    with pytest.raises(ValueError):
        min_workers(0, 10)


def test_linear_scaling_grows_to_the_largest_count_it_can_run() -> None:
    assert max_on_curve({n: float(n) for n in range(1, 17)}, 1, 0.5) == 16


def test_the_maximum_is_where_added_workers_stop_paying() -> None:
    # each worker past 4 adds a tenth of a worker's goodput: not worth half
    curve = {n: float(min(n, 4) + 0.1 * max(0, n - 4)) for n in range(1, 33)}
    assert max_on_curve(curve, 1, 0.5) == 4
    assert max_on_curve(curve, 1, 0.05) == 32  # a looser fraction takes them


def test_a_dip_does_not_end_the_range_nor_a_sawtooth_extend_it() -> None:
    # node boundary: 5 workers slower than 4, 8 much faster again
    dip = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 3.0, 6: 4.5, 7: 6.0, 8: 7.9}
    assert max_on_curve(dip, 1, 0.5) == 8
    # past 8 a sawtooth around a flat level: no tooth beats 8 by half a worker each
    saw = {**dip, **{n: 7.9 + (0.3 if n % 4 == 1 else -0.2) for n in range(9, 33)}}
    assert max_on_curve(saw, 1, 0.5) == 8


def test_a_range_takes_the_best_type_and_contains_the_request() -> None:
    fast = {n: float(min(n, 2)) for n in range(1, 9)}  # stops at 2
    slow = {n: 0.3 * n for n in range(1, 9)}  # linear to 8
    assert profile_range({"a100": fast, "t4": slow}, 64, 16) == (4, 8)
    assert profile_range({"a100": fast}, 64, 16, requested=6) == (4, 6)
    assert profile_range({"a100": fast}, 64, 64) == (1, 2)
    assert doubling_range(5) == (2, 10) and doubling_range(1) == (1, 2)
