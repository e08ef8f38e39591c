"""Reading a model description: zoo names, transformer specs, layer lists; every bad
value is refused with the field named."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.parallelism.inputs import parse_model
from lyra_ray.parallelism.transformer import ZOO


def test_zoo_name_transformer_and_layer_list() -> None:
    named = parse_model({"name": "GPT-18B", "batch": 1024})
    assert named.batch == 1024 and named.model.name == "gpt-18b"
    assert named.model.params == pytest.approx(ZOO["gpt-18b"].params, rel=1e-3)
    spec = parse_model({"layers": 40, "hidden": 6144, "heads": 48, "batch": 8})
    assert len(spec.model.layers) == 42 and spec.model.max_tp == 48
    assert spec.model.params == named.model.params
    rows = [{"fwd_flops": 1e9, "bwd_flops": 2e9, "param_bytes": 1e6, "act_bytes": 1e5}] * 3
    listed = parse_model({"layer_list": rows, "batch": 4})
    assert len(listed.model.layers) == 3 and listed.model.max_tp == 1
    split = parse_model({"layer_list": [{**r, "tp_comm_bytes": 1e5} for r in rows], "batch": 4})
    assert split.model.max_tp > 1
    assert parse_model("gpt-1.3b", batch=16).batch == 16


@pytest.mark.parametrize(
    "raw", [{"name": "gpt-18b", "batch": 7}, {"layers": 2, "hidden": 64, "heads": 4, "batch": 3}]
)
def test_canonical_form_reads_back_the_same(raw: dict[str, Any]) -> None:
    first = parse_model(raw)
    again = parse_model(first.to_dict())
    assert again.canonical == first.canonical and again.batch == first.batch


def test_layer_list_reads_back_the_same() -> None:
    raw = {"layer_list": [{"fwd_flops": 1, "bwd_flops": 2, "param_bytes": 3, "act_bytes": 4,
                           "tp_comm_bytes": 5, "name": "a"}], "batch": 2}  # fmt: skip
    first = parse_model(raw)
    assert parse_model(first.to_dict()).canonical == first.canonical
    assert parse_model(first.to_dict()).model.layers[0].tp_comm_bytes == 5


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"name": "gpt-18b"}, "model.batch"),
        ({"name": "gpt-9000", "batch": 8}, "model.name"),
        ({"name": "gpt-18b", "batch": 0}, "model.batch"),
        ({"name": "gpt-18b", "batch": 2.5}, "model.batch"),
        ({"name": "gpt-18b", "batch": True}, "model.batch"),
        ({"name": "gpt-18b", "batch": 10**12}, "model.batch"),
        ({"name": "gpt-18b", "batch": 8, "hidden": 5}, "'name' cannot be combined"),
        ({"layers": 2, "heads": 4, "batch": 8}, "model.hidden"),
        ({"layers": 2, "hidden": "wide", "heads": 4, "batch": 8}, "model.hidden"),
        ({"layers": 2, "hidden": math.nan, "heads": 4, "batch": 8}, "model.hidden"),
        ({"layers": 10**9, "hidden": 64, "heads": 4, "batch": 8}, "model.layers"),
        ({"layers": 2, "hidden": 64, "heads": 5, "batch": 8}, "model.heads"),
        ({"layers": 2, "hidden": 64, "heads": 4, "seq_len": -1, "batch": 8}, "model.seq_len"),
        ({"batch": 8}, "give exactly one"),
        ({"name": "gpt-18b", "batch": 8, "colour": "red"}, "unknown field"),
        ({"layer_list": [], "batch": 8}, "model.layer_list"),
        ({"layer_list": [1], "batch": 8}, "model.layer_list[0]"),
        ({"layer_list": [{"fwd_flops": 1}], "batch": 8}, "model.layer_list[0].bwd_flops"),
        (
            {
                "layer_list": [
                    {"fwd_flops": math.inf, "bwd_flops": 1, "param_bytes": 1, "act_bytes": 1}
                ],
                "batch": 8,
            },
            "model.layer_list[0].fwd_flops",
        ),
        (
            {
                "layer_list": [{"fwd_flops": -1, "bwd_flops": 1, "param_bytes": 1, "act_bytes": 1}],
                "batch": 8,
            },
            "model.layer_list[0].fwd_flops",
        ),
        ([1, 2], "model: must be a model name or a mapping"),
    ],
)
def test_bad_input_names_the_field(raw: Any, field: str) -> None:
    with pytest.raises(InputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_model(raw)
