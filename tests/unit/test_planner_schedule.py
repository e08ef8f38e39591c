"""Pipeline schedules: the bubble formulas, the pipeline time they come from, and what
each schedule keeps in memory."""

from __future__ import annotations

import pytest

from lyra_ray.parallelism import (
    Constants,
    GpuSpec,
    LayerCost,
    PlanOptions,
    bubble_fraction,
    layer_list,
    pipeline_time,
    plan,
)
from lyra_ray.parallelism.schedule import in_flight, valid


def test_bubble_is_p_minus_one_over_m() -> None:
    assert bubble_fraction(1, 8) == 0.0
    assert bubble_fraction(4, 8) == pytest.approx(3 / 8)
    assert bubble_fraction(8, 64) == pytest.approx(7 / 64)
    assert bubble_fraction(2, 1) == pytest.approx(1.0)


def test_interleaving_divides_the_bubble_by_v() -> None:
    assert bubble_fraction(4, 8, v=2) == pytest.approx(3 / 16)
    assert bubble_fraction(8, 32, v=4) == pytest.approx(7 / 128)
    assert bubble_fraction(4, 8, v=2) == bubble_fraction(4, 8) / 2


@pytest.mark.parametrize("bad", [(0, 1, 1), (1, 0, 1), (2, 2, 0)])
def test_bubble_refuses_nonsense(bad: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        bubble_fraction(*bad)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 16])
@pytest.mark.parametrize("v", [1, 2, 4])
def test_balanced_pipeline_time_has_the_formula_bubble(p: int, m: int, v: int) -> None:
    f = 0.37
    total = pipeline_time([f] * p, m, v)
    assert total == pytest.approx((m + (p - 1) / v) * f)
    assert (total - m * f) / (m * f) == pytest.approx(bubble_fraction(p, m, v))


def test_slowest_stage_sets_the_steady_state() -> None:
    # m microbatches pass the slowest stage back to back; the others add fill and drain.
    assert pipeline_time([1.0, 3.0, 1.0], m=10) == pytest.approx(10 * 3.0 + 2.0)


def test_in_flight_per_schedule() -> None:
    p, m = 4, 16
    assert [in_flight("gpipe", k, p, m) for k in range(p)] == [16.0] * 4
    assert [in_flight("1f1b", k, p, m) for k in range(p)] == [4.0, 3.0, 2.0, 1.0]
    # Interleaving keeps p + (p - 1)/v stage-equivalents on the first device (Megatron-LM).
    assert in_flight("interleaved", 0, p, m, v=2) == pytest.approx(p + (p - 1) / 2)
    assert in_flight("1f1b", 0, p, m=2) == 2.0  # never more than there are microbatches


def test_interleaving_needs_m_a_multiple_of_p_and_a_layer_per_chunk() -> None:
    assert valid("interleaved", p=4, m=8, v=2, layers_per_device=4)
    assert not valid("interleaved", p=4, m=6, v=2, layers_per_device=4)
    assert not valid("interleaved", p=1, m=8, v=2, layers_per_device=4)
    assert not valid("interleaved", p=4, m=8, v=4, layers_per_device=2)
    assert valid("1f1b", p=4, m=4, v=1, layers_per_device=1)


def test_1f1b_needs_as_many_microbatches_as_stages() -> None:
    """torch.distributed.pipelining's Schedule1F1B raises on m < p: a plan with fewer would
    fail when run (the live planner test once ranked 1F1B at one microbatch on two stages)."""
    assert not valid("1f1b", p=4, m=3, v=1, layers_per_device=1)
    assert valid("gpipe", p=4, m=3, v=1, layers_per_device=1)


def test_planner_reports_the_formula_bubble_for_identical_stages() -> None:
    layer = LayerCost("x", 1e12, 2e12, 1e6, 1e6, 0.0)
    model = layer_list("uniform", [layer] * 16)
    gpu = GpuSpec("g", 1e14, 80e9, 1e12, 1e11, 1e10, gpus_per_server=8)
    c = Constants(collective_latency_s=0.0)
    for sched, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        o = PlanOptions(
            tp=(1,), pp=(4,), microbatches=(2,), schedules=(sched,), chunks=(max(v, 2),),
            recompute="never", constants=c,
        )  # fmt: skip
        (got,) = plan(model, gpu, 4, 16, o)
        assert got.num_microbatches == 8
        assert got.bubble == pytest.approx(bubble_fraction(4, 8, v), rel=1e-9)
