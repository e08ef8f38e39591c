"""A placement as the JSON that SGLang's ``--init-expert-location`` loads.

WHY: a team that serves an MoE model with a real engine (SGLang with expert parallelism)
can then take lyra's plan, made from their own expert-load statistics, without running
lyra's service. The layout, checked against the published code (cited in docs/moe.md):

- SGLang (``python/sglang/srt/eplb/expert_location.py``, read at commit 6270b014):
  ``--init-expert-location`` takes a ``.json`` path (or ``.pt``, or inline JSON); a dict
  with the key ``physical_to_logical_map`` is passed as keyword arguments to
  ``ExpertLocationMetadata.init_by_mapping``, so that must be its only key. The map is
  ``[num_layers, num_physical_experts]``: for each layer, the logical expert of each
  physical slot. ``num_layers`` is the model's ``num_hidden_layers`` (DeepSeek-V3: 61,
  dense layers included); ``num_physical_experts`` = logical + ``ep_num_redundant_experts``
  must divide by the EP size, and physical slot ``p`` lives on GPU
  ``p // (num_physical_experts / ep_size)``.
- DeepSeek's EPLB (``eplb.py``, deepseek-ai/EPLB at commit d52c72d5): ``phy2log`` of
  ``rebalance_experts`` is that same ``[layers, num_replicas]`` map, slots grouped by GPU.

So: every layer of the load file gets a row (an all-zero, dense, layer gets SGLang's own
trivial map, ``p % experts``); each GPU's slots are consecutive, in the placement's order.
A plan that leaves a GPU's slot empty (``plan_for_regime`` at decode-sized steps) fills it
with another replica of the GPU's most loaded expert: the engine needs an expert in every
slot, and a replica on the same GPU adds no weights read elsewhere and moves no tokens
between GPUs.

Pure numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.planner import Placement

Ints = npt.NDArray[np.int64]


def physical_to_logical(plan: Placement) -> Ints:
    """[L, devices * slots]: the logical expert of every physical slot, GPU by GPU."""
    layers = plan.replica_expert.shape[0]
    slots = plan.slots
    out = np.full((layers, plan.devices * slots), -1, dtype=np.int64)
    per_rep = plan.planned_load / np.maximum(plan.counts, 1)
    for i in range(layers):
        for g in range(plan.devices):
            mine = plan.replica_expert[i][plan.replica_device[i] == g]
            if mine.size > slots:
                raise ValueError(f"layer {i}: GPU {g} holds {mine.size} replicas > slots {slots}")
            pool = mine if mine.size else plan.replica_expert[i]  # an empty GPU: any expert
            heavy = pool[np.argmax(per_rep[i][pool])]
            row = np.concatenate([mine, np.full(slots - mine.size, heavy)])
            out[i, g * slots : (g + 1) * slots] = row
    return out


def sglang_expert_location(
    plan: Placement, planned_layers: list[int], total_layers: int
) -> dict[str, Any]:
    """``{"physical_to_logical_map": [[...] per layer]}`` for every one of ``total_layers``
    layers; ``planned_layers`` are the rows of ``plan`` (the file's MoE layers)."""
    phy = physical_to_logical(plan)
    experts = plan.planned_load.shape[1]
    trivial = (np.arange(phy.shape[1]) % experts).tolist()
    rows: list[list[int]] = [list(trivial) for _ in range(total_layers)]
    for row, layer in zip(phy, planned_layers, strict=True):
        rows[layer] = [int(e) for e in row]
    return {"physical_to_logical_map": rows}


def check_map(data: Any, layers: int, experts: int, physical: int) -> None:
    """Raise ValueError unless ``data`` is a loadable map (the checks SGLang's loader and
    its dispatch rely on): the one key, ``layers`` rows of ``physical`` ints each in
    ``[0, experts)``, every logical expert in every row at least once."""
    if not isinstance(data, dict) or list(data) != ["physical_to_logical_map"]:
        raise ValueError("expert location: want exactly one key, physical_to_logical_map")
    rows = data["physical_to_logical_map"]
    if not isinstance(rows, list) or len(rows) != layers:
        raise ValueError(f"expert location: want {layers} layers")
    for i, r in enumerate(rows):
        if not isinstance(r, list) or len(r) != physical:
            raise ValueError(f"expert location: layer {i}: want {physical} slots")
        if not all(isinstance(e, int) and 0 <= e < experts for e in r):
            raise ValueError(f"expert location: layer {i}: ids must be in [0, {experts})")
        if len(set(r)) != experts:
            raise ValueError(f"expert location: layer {i}: a logical expert has no slot")
