"""Per-GPU memory of a plan: training state, stashed activations, working memory.

* State: 16 bytes per parameter (mixed-precision Adam), split ``t`` ways by tensor
  parallelism and by stage by pipeline parallelism; data parallelism replicates it (no
  ZeRO). A tied output head holds a copy of the embedding unless both share a stage.
* Activations, per microbatch in flight: without recomputation every layer keeps its
  activations (Korthikanti et al.'s per-layer formula, in :mod:`.transformer`); with
  recomputation a layer keeps only its input, and the backward pass needs one layer's
  full activations at a time (the working memory). The output head is never recomputed.
* In flight: the schedule decides (:func:`lyra_ray.parallelism.schedule.in_flight`);
  stage 0 of 1F1B keeps ``p`` microbatches, every GPipe stage keeps all ``m``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lyra_ray.parallelism.cost import Constants
from lyra_ray.parallelism.layers import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerMemory:
    """Per-layer bytes on one GPU: ``static`` always, ``act`` per microbatch in flight,
    ``work`` while the layer runs its backward pass."""

    static: list[float]
    act: list[float]
    work: list[float]


def layer_memory(model: ModelSpec, t: int, b: int, recompute: bool, c: Constants) -> LayerMemory:
    static, act, work = [], [], []
    prev_out = 0.0
    for layer in model.layers:
        static.append(c.state_bytes_per_param_byte * layer.param_bytes / t)
        full = b * (layer.act_bytes / t + layer.act_bytes_replicated)
        if recompute and layer.checkpointed:
            act.append(b * prev_out)  # the layer's input, replicated on every tensor rank
            work.append(full)
        else:
            act.append(full)
            work.append(0.0)
        prev_out = layer.out_bytes
    return LayerMemory(static, act, work)


def device_memory(
    mem: LayerMemory,
    model: ModelSpec,
    layer_ids: list[int],
    in_flight: float,
) -> float:
    """Peak bytes on a device holding ``layer_ids`` (all its chunks).

    ``in_flight`` counts microbatches of the whole device's activations; for an
    interleaved device :func:`lyra_ray.parallelism.schedule.in_flight` already turns
    chunk-microbatches into that unit.
    """
    ids = set(layer_ids)
    static = 0.0
    for i in layer_ids:
        layer = model.layers[i]
        if layer.shared_params and 0 in ids:
            continue  # the tied head shares the embedding's weights on this device
        static += mem.static[i]
    act = sum(mem.act[i] for i in layer_ids)
    work = max((mem.work[i] for i in layer_ids), default=0.0)
    return static + in_flight * act + work
