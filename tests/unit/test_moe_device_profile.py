"""The MoE device's expert timing, which the live service's cost model is fitted to.

WHY: a best of 7 taken from a fresh process's first calls put the 256-token/1-token ratio
at 5.4 where it is 8.4 warm, and moved the live plans across the knee (moe_device's
``PROFILE_REPEATS``). A virtual clock stands for the host: the first calls are slow, later
ones are not, and one spell mid-run is slow too.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray")

from lyra_ray.serving.moe_device import (
    PROFILE_TOKENS,
    PROFILE_WARMUP,
    time_expert,
)


class Host:
    """A clock that ``run`` advances: ``floor + per_token * n`` seconds a call, times a
    slowdown for the first ``cold`` calls and for calls ``spell`` (a range of call numbers)."""

    def __init__(self, cold: int, spell: range = range(0)) -> None:
        self.now, self.calls, self.cold, self.spell = 0.0, 0, cold, spell
        self.sizes: list[int] = []

    def clock(self) -> float:
        return self.now

    def run(self, x: Any) -> None:
        n = len(x)
        slow = 2.0 if self.calls < self.cold or self.calls in self.spell else 1.0
        self.now += slow * (10e-6 + 0.35e-6 * n)
        self.calls += 1
        self.sizes.append(n)


def test_cold_first_calls_do_not_set_the_measured_times() -> None:
    host = Host(cold=2 * (PROFILE_WARMUP + 10))  # ten timed rounds still cold
    one, many = time_expert(host.run, 32, clock=host.clock)
    assert one == pytest.approx(10.35e-6)
    assert many == pytest.approx(10e-6 + 0.35e-6 * PROFILE_TOKENS)


def test_a_slow_spell_touches_both_sizes_and_the_best_is_kept() -> None:
    host = Host(cold=0, spell=range(20, 60))
    one, many = time_expert(host.run, 8, many=64, repeats=50, warmup=0, clock=host.clock)
    assert (one, many) == (pytest.approx(10.35e-6), pytest.approx(10e-6 + 0.35e-6 * 64))
    # interleaved: 1 token, then many, round after round
    assert host.sizes[:4] == [1, 64, 1, 64] and len(host.sizes) == 100


def test_the_profile_runs_real_vectors_of_the_experts_width() -> None:
    shapes: list[tuple[int, ...]] = []
    time_expert(lambda x: shapes.append(x.shape), 16, many=4, repeats=1, warmup=1)
    assert shapes == [(1, 16), (4, 16), (1, 16), (4, 16)]
