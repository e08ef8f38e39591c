"""The search: every returned plan is valid and ranked, pruning changes nothing, tensor
parallelism across servers is slow, and bad hardware numbers are refused."""

from __future__ import annotations

import math

import pytest

from lyra_ray.parallelism import GpuSpec, PlanOptions, gpu_spec, plan, zoo_model

A100 = gpu_spec("a100")


@pytest.mark.parametrize(
    ("name", "n", "batch"),
    [("gpt-1.3b", 8, 512), ("gpt-13b", 32, 512), ("gpt-39b", 64, 1536), ("gpt-175b", 96, 1536)],
)
def test_pruned_search_returns_the_exhaustive_ranking(name: str, n: int, batch: int) -> None:
    model = zoo_model(name)
    pruned = plan(model, A100, n, batch, PlanOptions(top_k=5, prune=True))
    full = plan(model, A100, n, batch, PlanOptions(top_k=5, prune=False))
    assert pruned and [p.to_dict() for p in pruned] == [p.to_dict() for p in full]


def test_plans_are_valid_distinct_and_ranked() -> None:
    got = plan(zoo_model("gpt-13b"), A100, 32, 512, PlanOptions(top_k=8))
    assert len(got) == 8
    assert [p.iteration_s for p in got] == sorted(p.iteration_s for p in got)
    assert len({p.shape for p in got}) == len(got)
    for p in got:
        assert p.t * p.p * p.d == 32
        assert p.microbatch * p.num_microbatches * p.d == 512
        assert sum(p.stages) == len(zoo_model("gpt-13b").layers)
        assert len(p.stages) == p.p * p.chunks
        assert p.bubble >= 0 and p.memory_bytes <= A100.usable_memory
        assert 0 < p.tflops_per_gpu < A100.peak_flops / 1e12
        assert p.iteration_s == pytest.approx(p.pipeline_s + p.dp_s + p.optimizer_s)


def test_tensor_parallelism_beyond_a_server_is_slow() -> None:
    # 16 A100s in two servers of 8: a 16-way tensor group all-reduces over the network.
    model = zoo_model("gpt-39b")
    base = {"pp": (1,), "top_k": 1}
    (inside,) = plan(model, A100, 16, 256, PlanOptions(tp=(8,), **base))  # type: ignore[arg-type]
    (across,) = plan(model, A100, 16, 256, PlanOptions(tp=(16,), **base))  # type: ignore[arg-type]
    assert across.iteration_s > 1.5 * inside.iteration_s
    best = plan(model, A100, 16, 256, PlanOptions(top_k=3))
    assert all(p.t <= A100.gpus_per_server for p in best)


def test_groups_that_straddle_servers_pay_for_the_network() -> None:
    # t = 6 divides GPT-175B's heads, but groups of 6 on servers of 8 straddle servers.
    assert A100.group_bw(8) == A100.intra_bw
    assert A100.group_bw(6) == A100.inter_bw
    assert A100.group_bw(16) == A100.inter_bw


def test_restrictions_and_empty_answers() -> None:
    model = zoo_model("gpt-1.3b")
    got = plan(model, A100, 8, 64, PlanOptions(tp=(2,), pp=(2,), microbatches=(4,), top_k=3))
    assert [(p.t, p.p, p.d, p.microbatch) for p in got] == [(2, 2, 2, 4)]
    data_only = PlanOptions(tp=(1,), pp=(1,))
    assert plan(model, A100, 8, 3, data_only) == []  # 3 sequences cannot feed 8 replicas...
    assert plan(model, A100, 8, 3, PlanOptions(tp=(8,)))  # ...but one 8-way group can


@pytest.mark.parametrize("bad", [{"n": 0}, {"batch": 0}])
def test_plan_refuses_no_gpus_or_no_batch(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        plan(zoo_model("gpt-1.3b"), A100, bad.get("n", 8), bad.get("batch", 64))


@pytest.mark.parametrize(
    "kw",
    [{"peak_flops": math.nan}, {"memory_bytes": math.inf}, {"intra_bw": 0}, {"hbm_bw": -1.0}],
)
def test_gpu_spec_refuses_non_finite_or_non_positive_numbers(kw: dict[str, float]) -> None:
    base = {"peak_flops": 1e14, "memory_bytes": 8e10, "hbm_bw": 1e12, "intra_bw": 1e11}
    with pytest.raises(ValueError, match=next(iter(kw))):
        GpuSpec("g", **{**base, **kw}, inter_bw=1e10)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw", [{"top_k": 0}, {"recompute": "sometimes"}, {"schedules": ("zb",)}, {"chunks": (1,)}]
)
def test_plan_options_refuse_nonsense(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PlanOptions(**kw)  # type: ignore[arg-type]
