"""The planner's per-layer time on an H200, fitted to measured GPT layers (issue #29).

Why these tests: a plan is only as good as the layer times it sums. The rows in
tests/data/h200_gpt_layer.json (copied with their provenance from
shared/data/gpu/h200.json, so this runs without ../shared) are one GPT layer's forward +
backward in eager PyTorch on a real H200; the planner must explain every one within 15 %
with a handful of constants (a model, not a table), keep the A100 path (the PTD-P table)
as it was, and take attention (flash or standard) from the model description.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.parallelism import (
    PlanOptions,
    Transformer,
    gpu_spec,
    plan,
    transformer_layers,
    zoo_model,
)
from lyra_ray.parallelism.cost import (
    DEFAULT,
    FITTED,
    H200_SOURCE,
    Constants,
    constants_for,
    layer_time_s,
)
from lyra_ray.parallelism.inputs import parse_model
from lyra_ray.parallelism.layers import LayerCost
from lyra_ray.parallelism.memory import layer_memory
from lyra_ray.parallelism.transformer import ZOO

ROOT = Path(__file__).parents[2]
DATA = json.loads((ROOT / "tests" / "data" / "h200_gpt_layer.json").read_text())
ROWS = DATA["rows"]
FIT = json.loads((ROOT / "benchmarks" / "results" / "planner_fit.json").read_text())
PTDP = json.loads((ROOT / "tests" / "data" / "ptdp_weak_scaling.json").read_text())
H200 = gpu_spec("h200")


def block(hidden: int, seq: int = 2048, attention: str = "flash") -> LayerCost:
    tf = Transformer(1, hidden, hidden // 128, seq_len=seq, attention=attention)  # type: ignore[arg-type]
    return transformer_layers(tf).layers[1]


def row_id(row: dict[str, Any]) -> str:
    return f"h{row['hidden']}-mb{row['microbatch']}"


def test_h200_is_in_the_catalogue_with_its_spec_sheet() -> None:
    assert gpu_spec("H200") is H200 and H200.name == "h200"
    assert H200.peak_flops == 989e12 and H200.hbm_bw == 4.8e12
    assert H200.memory_bytes == 141 * 2**30  # "141 GB", in the unit the catalogue uses


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_every_measured_row_is_predicted_within_15_percent(row: dict[str, Any]) -> None:
    # No constants given: layer_time_s takes those fitted for the GPU.
    got = layer_time_s(block(row["hidden"], row["seq"]), H200, 1, row["microbatch"], False)
    assert got == pytest.approx(row["s"], rel=0.15)


def test_the_data_is_the_shared_measurement_the_catalogue_also_uses() -> None:
    src = DATA["source"]
    assert src["measured"] == "2026-11-26" and "h200.json" in src["file"]
    assert "torch 2.11" in src["gpu"] and "16 host cores" in src["gpu"]
    assert len(ROWS) == 16 and {r["seq"] for r in ROWS} == {2048}
    catalogue = json.loads((ROOT / "lyra_ray/model/data/h200_throughputs.json").read_text())
    prov = catalogue["provenance"]
    assert prov["gpu"] == src["gpu"] and prov["measured"].startswith(src["measured"])
    assert "2026-11-26" in H200_SOURCE and "h200.json" in H200_SOURCE
    assert "h200_throughputs.json" in H200_SOURCE


def test_at_most_six_constants_per_gpu_type_and_the_code_holds_the_fit() -> None:
    for gpu, c in FITTED.items():
        differ = [
            f.name for f in fields(Constants) if getattr(c, f.name) != getattr(DEFAULT, f.name)
        ]
        assert len(differ) <= 6, (gpu, differ)
        assert gpu_spec(gpu).name == gpu
    # benchmarks/planner_fit.py wrote these constants; docs/planner.md renders its rows.
    h200 = asdict(FITTED["h200"])
    assert {k: h200[k] for k in FIT["constants"]} == FIT["constants"]
    assert len(FIT["fitted"]) <= 6 and FIT["max_ratio"] <= 1.15 and FIT["min_ratio"] >= 0.85


def test_a_hidden_size_left_out_of_the_fit_is_still_predicted_within_15_percent() -> None:
    assert {x["held_out_hidden"] for x in FIT["leave_one_hidden_out"]} == {1024, 2048, 4096, 8192}
    assert FIT["leave_one_hidden_out_max_ratio"] <= 1.15
    assert FIT["leave_one_hidden_out_min_ratio"] >= 0.85


def test_types_without_a_fit_keep_the_default_model() -> None:
    a100 = gpu_spec("a100")
    assert constants_for(a100) is DEFAULT and constants_for("h200") is FITTED["h200"]
    for layer in zoo_model("gpt-18b").layers:
        assert layer_time_s(layer, a100, 2, 4, True) == layer_time_s(
            layer, a100, 2, 4, True, Constants()
        )
    assert DEFAULT.host_floor_s == 0 and DEFAULT.hbm_efficiency == 1


def test_the_host_floor_bounds_small_layers_and_recomputation_adds_a_third() -> None:
    c = FITTED["h200"]
    tiny = block(128, seq=128)
    assert layer_time_s(tiny, H200, 1, 1, False) == pytest.approx(c.host_floor_s, rel=1e-3)
    assert layer_time_s(tiny, H200, 1, 1, True) == pytest.approx(4 / 3 * c.host_floor_s, rel=1e-3)
    # An embedding lookup computes nothing and dispatches a few kernels: no floor.
    embedding = transformer_layers(Transformer(1, 1024, 8)).layers[0]
    assert layer_time_s(embedding, H200, 1, 1, False) < c.host_floor_s / 10
    # A large layer is GPU-bound: the floor costs it (almost) nothing.
    big = block(8192)
    no_floor = layer_time_s(big, H200, 1, 8, False, Constants(**{**asdict(c), "host_floor_s": 0}))
    assert layer_time_s(big, H200, 1, 8, False) == pytest.approx(no_floor, rel=1e-6)


@pytest.mark.parametrize("gpu", ["h200", "a100"])
def test_standard_attention_moves_and_keeps_more_than_flash(gpu: str) -> None:
    spec = gpu_spec(gpu)
    for s in (1024, 2048, 8192):
        flash, std = block(4096, s), block(4096, s, "standard")
        assert flash.fwd_flops == std.fwd_flops and flash.param_bytes == std.param_bytes
        assert std.mem_bytes > flash.mem_bytes and std.act_bytes > flash.act_bytes
        for recompute in (False, True):
            assert layer_time_s(std, spec, 1, 4, recompute) > layer_time_s(
                flash, spec, 1, 4, recompute
            )
    # The score matrix grows with s^2: its share of the difference grows with the sequence.
    gap = [
        layer_time_s(block(4096, s, "standard"), spec, 1, 1, False)
        / layer_time_s(block(4096, s), spec, 1, 1, False)
        for s in (2048, 8192)
    ]
    assert gap[1] > gap[0] > 1


def test_flash_attention_shrinks_the_memory_of_a_plan() -> None:
    std = zoo_model("gpt-18b")
    flash = transformer_layers(Transformer(40, 6144, 48), "gpt-18b")
    for recompute in (False, True):
        m_std = layer_memory(std, 2, 2, recompute, DEFAULT)
        m_flash = layer_memory(flash, 2, 2, recompute, DEFAULT)
        assert sum(m_flash.act) + max(m_flash.work) < sum(m_std.act) + max(m_std.work)


def test_the_ptdp_models_run_standard_attention_and_the_rest_flash() -> None:
    for row in PTDP["rows"]:
        assert ZOO[row["model"]].attention == "standard", row["model"]
    assert ZOO["gpt-162b"].attention == "standard"
    assert ZOO["gpt-1.3b"].attention == "flash" and Transformer(2, 64, 4).attention == "flash"


def test_a_plan_on_h200_uses_the_fitted_constants_unless_told_otherwise() -> None:
    model = zoo_model("gpt-1.3b")
    (fitted,) = plan(model, H200, 8, 64, PlanOptions(top_k=1))
    (default,) = plan(model, H200, 8, 64, PlanOptions(top_k=1, constants=DEFAULT))
    assert fitted.iteration_s != default.iteration_s
    (same,) = plan(model, H200, 8, 64, PlanOptions(top_k=1, constants=FITTED["h200"]))
    assert same == fitted


def test_attention_is_read_from_a_model_description() -> None:
    dims = {"layers": 2, "hidden": 64, "heads": 4, "batch": 2}
    default = parse_model(dims).model.layers[1]
    assert default == transformer_layers(Transformer(2, 64, 4, attention="flash")).layers[1]
    std = parse_model({**dims, "attention": "standard"})
    want = transformer_layers(Transformer(2, 64, 4, attention="standard")).layers[1]
    assert std.model.layers[1] == want
    assert parse_model(std.to_dict()).canonical == std.canonical
    # A named model keeps its own attention unless the description overrides it.
    named = parse_model({"name": "gpt-18b", "batch": 8})
    assert named.canonical == (("batch", 8), ("name", "gpt-18b"))
    flash = parse_model({"name": "gpt-18b", "batch": 8, "attention": "flash"})
    assert flash.model.layers[1].mem_bytes < named.model.layers[1].mem_bytes
    assert parse_model(flash.to_dict()).canonical == flash.canonical != named.canonical
    same = parse_model({"name": "gpt-18b", "batch": 8, "attention": "standard"})
    assert same.canonical == named.canonical


@pytest.mark.parametrize(
    "raw",
    [
        {"layers": 2, "hidden": 64, "heads": 4, "batch": 2, "attention": "fast"},
        {"layers": 2, "hidden": 64, "heads": 4, "batch": 2, "attention": True},
        {"layers": 2, "hidden": 64, "heads": 4, "batch": 2, "attention": ["flash"]},
        {"name": "gpt-1.3b", "batch": 2, "attention": "FlashAttention"},
        {"name": "gpt-1.3b", "batch": 2, "attention": None},
    ],
)
def test_a_bad_attention_is_refused_naming_the_field(raw: dict[str, Any]) -> None:
    with pytest.raises(InputError, match=r"model\.attention"):
        parse_model(raw)


def test_attention_does_not_apply_to_a_layer_list_or_a_bad_transformer() -> None:
    row = {"fwd_flops": 1, "bwd_flops": 2, "param_bytes": 3, "act_bytes": 4}
    with pytest.raises(InputError, match="layer_list"):
        parse_model({"layer_list": [row], "batch": 1, "attention": "flash"})
    with pytest.raises(ValueError, match="attention"):
        Transformer(2, 64, 4, attention="sparse")  # type: ignore[arg-type]
