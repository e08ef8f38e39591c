"""The planner against the PTD-P paper (Narayanan et al., SC'21): its weak-scaling table
of GPT models from 1.7B to 1T parameters on A100s, and its tensor-versus-pipeline
trade-off for a 162B GPT on 64 GPUs. The table and its source: tests/data/ptdp_weak_scaling.json;
the comparison side by side: docs/planner.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.parallelism import Plan, PlanOptions, gpu_spec, plan, zoo_model

TABLE = json.loads((Path(__file__).parents[1] / "data" / "ptdp_weak_scaling.json").read_text())
ROWS = TABLE["rows"]
A100 = gpu_spec("a100")
PAPER = PlanOptions(recompute="always", top_k=1)
"""The paper recomputes activations in every run of the table."""

DIFFERENT = {
    "gpt-3.6b": (1, 4),
    "gpt-7.5b": (2, 2),
    "gpt-18b": (2, 4),
    "gpt-39b": (2, 8),
    "gpt-76b": (4, 8),
    "gpt-145b": (4, 12),
    "gpt-310b": (8, 12),
    "gpt-530b": (8, 21),
}
"""Rows where the planner's (t, p) differs from the paper's, and what it picks instead.

Why (docs/planner.md, "Against the PTD-P table"): the paper's rows follow its rule of
thumb, tensor parallelism up to a server's 8 GPUs first, and do not claim to be the best
shape per row. The cost model charges an 8-way tensor group its all-reduces (17 % of an
18B layer's time at t = 8, 3 % at t = 2), narrower GEMMs (62 % of peak against 68 %) and
the layer norms and dropouts every tensor rank repeats, and finds that trading tensor
for (interleaved) pipeline parallelism costs less; how much less is a prediction the
paper's table cannot confirm or refute. The planner never picks a tensor group larger
than a server, and from 310B up it stays at t = 8 as the paper does. Its predictions for
the paper's own shapes are within 7 % of what the paper measured.
"""


def row_id(row: dict[str, Any]) -> str:
    return str(row["model"])


def test_the_table_records_its_source() -> None:
    src = TABLE["source"]
    assert "arXiv:2104.04473" in src["paper"] and "Table 1" in src["paper"]
    assert "50a4b5fa0280a160cc1b03a1c15faddbc1b1da9a" in src["checked_against"]
    for row in ROWS:
        assert row["t"] * row["p"] * (row["gpus"] // (row["t"] * row["p"])) == row["gpus"]
        assert row["tflops_per_gpu"] / 312 == pytest.approx(row["percent_peak"] / 100, abs=0.01)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_models_have_the_papers_parameter_counts(row: dict[str, Any]) -> None:
    assert zoo_model(row["model"]).params / 1e9 == pytest.approx(row["params_b"], rel=0.03)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_throughput_of_the_papers_shape_is_within_15_percent(row: dict[str, Any]) -> None:
    o = PlanOptions(recompute="always", top_k=1, tp=(row["t"],), pp=(row["p"],))
    (got,) = plan(zoo_model(row["model"]), A100, row["gpus"], row["batch"], o)
    assert got.tflops_per_gpu == pytest.approx(row["tflops_per_gpu"], rel=0.15)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_chosen_shape_agrees_or_the_difference_is_recorded(row: dict[str, Any]) -> None:
    (got,) = plan(zoo_model(row["model"]), A100, row["gpus"], row["batch"], PAPER)
    chosen, paper = (got.t, got.p), (row["t"], row["p"])
    assert chosen == DIFFERENT.get(row["model"], paper)
    assert got.t <= A100.gpus_per_server and got.t <= row["t"]


def shape(model: str, n: int, batch: int, t: int, p: int) -> Plan:
    o = PlanOptions(
        tp=(t,), pp=(p,), microbatches=(1,), schedules=("1f1b",), recompute="always", top_k=1
    )
    (got,) = plan(zoo_model(model), A100, n, batch, o)
    return got


@pytest.mark.parametrize("batch", [32, 64, 128])
def test_162b_on_64_gpus_eight_by_eight_beats_more_pipeline_or_more_tensor(batch: int) -> None:
    # Figure 13 of the paper: 1F1B, microbatch 1. More pipeline stages pay a larger
    # bubble; tensor groups of 16 or 32 all-reduce across servers.
    best = shape("gpt-162b", 64, batch, 8, 8)
    for t, p in ((2, 32), (4, 16), (16, 4), (32, 2)):
        other = shape("gpt-162b", 64, batch, t, p)
        assert best.iteration_s < other.iteration_s, (t, p, batch)
