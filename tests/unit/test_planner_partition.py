"""The stage partitioner: Megatron-LM's even split, and the DAPPLE-style balanced split
that beats it on uneven layers, slow boundaries and memory-bound early stages."""

from __future__ import annotations

import math

import pytest

from lyra_ray.parallelism import (
    GpuSpec,
    LayerCost,
    PlanOptions,
    gpu_spec,
    layer_list,
    plan,
    zoo_model,
)
from lyra_ray.parallelism.partition import StageInputs, balanced_split, even_split, stage_times


def inputs(time: list[float], link: list[float] | None = None, **kw: object) -> StageInputs:
    n = len(time)
    return StageInputs(
        time=time,
        out=kw.pop("out", [1.0] * n),  # type: ignore[arg-type]
        link=link if link is not None else [0.0] * (n - 1),
        static=kw.pop("static", [0.0] * n),  # type: ignore[arg-type]
        act=kw.pop("act", [0.0] * n),  # type: ignore[arg-type]
        work=[0.0] * n,
        in_flight=kw.pop("in_flight", [1.0] * n),  # type: ignore[arg-type]
        mem_cap=kw.pop("mem_cap", math.inf),  # type: ignore[arg-type]
    )


def test_even_split_is_megatrons() -> None:
    # 32 blocks plus embedding and head on 8 stages: 4 blocks each, ends attached.
    assert even_split(34, 8, ends_attached=True) == (5, 4, 4, 4, 4, 4, 4, 5)
    assert even_split(10, 3) == (4, 3, 3)
    assert even_split(3, 3, ends_attached=True) == (1, 1, 1)
    with pytest.raises(ValueError):
        even_split(2, 3)


def test_balanced_beats_even_on_uneven_layers() -> None:
    s = inputs([1, 1, 1, 1, 1, 1, 4, 4])
    even = (4, 4)
    best = balanced_split(s, 2)
    assert best == (6, 2)
    assert max(stage_times(s, best)) == 8 < max(stage_times(s, even)) == 10


def test_balanced_split_is_optimal_on_small_cases() -> None:
    from itertools import combinations

    times = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0]
    s = inputs(times)
    for k in (2, 3, 4):
        cuts = combinations(range(1, len(times)), k - 1)
        brute = min(
            max(stage_times(s, [b - a for a, b in zip((0, *c), (*c, len(times)), strict=True)]))
            for c in cuts
        )
        got = balanced_split(s, k)
        assert got is not None
        assert max(stage_times(s, got)) == pytest.approx(brute, rel=1e-3)


def test_a_slow_boundary_moves_layers_away_from_it() -> None:
    # Four identical layers per stage would be even; boundary 1 (stage 1 -> 2) is slow,
    # and both of its stages pay for it, so they get fewer layers than stage 0.
    s = inputs([1.0] * 12, link=[0.0, 0.0])
    assert balanced_split(s, 3) == (4, 4, 4)
    slow = inputs([1.0] * 12, link=[0.0, 1.5], out=[1.0] * 12)
    got = balanced_split(slow, 3)
    assert got is not None and got[0] > got[1] and got[0] > got[2]
    assert max(stage_times(slow, got)) < max(stage_times(slow, (4, 4, 4)))


def test_memory_limits_the_first_stages_of_1f1b() -> None:
    # 1F1B: stage k keeps p - k microbatches, so the first stage fits fewer layers.
    s = inputs([1.0] * 12, act=[1.0] * 12, in_flight=[3.0, 2.0, 1.0], mem_cap=9.0)
    got = balanced_split(s, 3)
    assert got is not None and got[0] <= 3 and sum(got) == 12
    assert (
        balanced_split(
            inputs([1.0] * 12, act=[1.0] * 12, in_flight=[3.0, 2.0, 1.0], mem_cap=2.0), 3
        )
        is None
    )


def test_planner_uneven_stages_beat_even_split_on_a_gpt_with_a_heavy_head() -> None:
    # GPT-1.7B's output head costs about two blocks (V / 12h = 1.85): even stages
    # overload the last one.
    model = zoo_model("gpt-1.7b")
    a100 = gpu_spec("a100")
    base = {"tp": (1,), "pp": (4,), "top_k": 1, "schedules": ("1f1b",)}
    (even,) = plan(model, a100, 4, 64, PlanOptions(partition="even", **base))  # type: ignore[arg-type]
    (bal,) = plan(model, a100, 4, 64, PlanOptions(partition="balanced", **base))  # type: ignore[arg-type]
    assert even.stages == (7, 6, 6, 7)
    assert bal.stages[-1] < even.stages[-1]
    assert bal.iteration_s < 0.95 * even.iteration_s


def test_planner_balances_around_a_server_boundary() -> None:
    # Servers of 2 GPUs and a slow network: with p = 4 the middle boundary crosses
    # servers and its two stages get fewer layers.
    layer = LayerCost("x", 1e12, 2e12, 1e6, 1e6, 5e8)
    model = layer_list("uniform", [layer] * 16)
    gpu = GpuSpec("g", 1e14, 80e9, 1e12, 1e11, 5e8, gpus_per_server=2)
    base = {"tp": (1,), "pp": (4,), "top_k": 1, "schedules": ("1f1b",), "recompute": "never"}
    (even,) = plan(model, gpu, 4, 32, PlanOptions(partition="even", **base))  # type: ignore[arg-type]
    (bal,) = plan(model, gpu, 4, 32, PlanOptions(partition="balanced", **base))  # type: ignore[arg-type]
    assert even.stages == (4, 4, 4, 4)
    assert bal.stages[1] < 4 and bal.stages[2] < 4
    assert bal.iteration_s < even.iteration_s
