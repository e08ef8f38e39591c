"""The memory model: training state, activations (Korthikanti et al.), recomputation,
what each schedule keeps, and that no plan the planner returns overflows a GPU."""

from __future__ import annotations

import pytest

from lyra_ray.parallelism import PlanOptions, gpu_spec, plan, zoo_model
from lyra_ray.parallelism.cost import Constants
from lyra_ray.parallelism.memory import layer_memory
from lyra_ray.parallelism.transformer import ZOO

A100 = gpu_spec("a100")
C = Constants()


def only(model: str, n: int, batch: int, **kw: object) -> object:
    o = PlanOptions(top_k=1, **kw)  # type: ignore[arg-type]
    got = plan(zoo_model(model), A100, n, batch, o)
    assert got, f"{model} on {n} GPUs: nothing fits"
    return got[0]


def test_state_is_16_bytes_per_parameter_split_by_tensor_parallelism() -> None:
    model = zoo_model("gpt-1.3b")
    for t in (1, 2, 4):
        mem = layer_memory(model, t, 1, False, C)
        total = sum(s for s, x in zip(mem.static, model.layers, strict=True) if not x.shared_params)
        assert total == pytest.approx(16 * model.params / t)


def test_block_activations_follow_korthikanti() -> None:
    tf = ZOO["gpt-18b"]
    s, h, a = tf.seq_len, tf.hidden, tf.heads
    model = zoo_model("gpt-18b")
    block = 1  # layer 0 is the embedding
    for t in (1, 2, 8):
        mem = layer_memory(model, t, 2, False, C)
        assert mem.act[block] == pytest.approx(2 * s * h * (10 + 24 / t + 5 * a * s / (h * t)))


def test_recomputation_keeps_only_layer_inputs() -> None:
    model = zoo_model("gpt-18b")
    full = layer_memory(model, 8, 1, False, C)
    redo = layer_memory(model, 8, 1, True, C)
    tf = ZOO["gpt-18b"]
    assert redo.act[1] == pytest.approx(2 * tf.seq_len * tf.hidden)  # its fp16 input
    assert redo.act[1] < full.act[1] / 10
    assert redo.work[1] == pytest.approx(full.act[1])  # one layer rebuilt at a time
    assert redo.act[-1] == full.act[-1]  # the head is never recomputed


def test_one_gpu_plan_holds_the_whole_training_state() -> None:
    got = only("gpt-1.3b", 1, 64)
    assert got.memory_bytes >= 16 * zoo_model("gpt-1.3b").params  # type: ignore[attr-defined]


def test_recomputation_and_1f1b_and_tensor_parallelism_each_save_memory() -> None:
    base = {"pp": (4,), "microbatches": (1,)}
    keep = only("gpt-13b", 16, 64, tp=(4,), recompute="never", schedules=("1f1b",), **base)
    redo = only("gpt-13b", 16, 64, tp=(4,), recompute="always", schedules=("1f1b",), **base)
    gpipe = only("gpt-13b", 16, 64, tp=(4,), recompute="always", schedules=("gpipe",), **base)
    wider = only("gpt-13b", 32, 64, tp=(8,), recompute="always", schedules=("1f1b",), **base)
    assert redo.memory_bytes < keep.memory_bytes  # type: ignore[attr-defined]
    assert redo.memory_bytes < gpipe.memory_bytes  # type: ignore[attr-defined]
    assert wider.memory_bytes < redo.memory_bytes  # type: ignore[attr-defined]


def test_no_plan_exceeds_usable_memory_and_too_big_models_get_none() -> None:
    for name, n, batch in (("gpt-39b", 64, 512), ("gpt-175b", 128, 256), ("gpt-1.3b", 4, 64)):
        for got in plan(zoo_model(name), A100, n, batch, PlanOptions(top_k=10)):
            assert got.memory_bytes <= A100.usable_memory
    v100 = gpu_spec("v100")
    assert plan(zoo_model("gpt-175b"), v100, 8, 64) == []  # 2.8 TB of state on 256 GB
    assert plan(zoo_model("gpt-18b"), v100, 8, 64) == []  # 294 GB of state on 256 GB
