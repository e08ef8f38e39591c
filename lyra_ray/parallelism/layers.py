"""What the planner knows about a model: a sequence of layers and what each costs.

Every quantity is *per sample* (one sequence) so that a microbatch of ``b`` samples
costs ``b`` times as much; the planner scales by ``1/t`` for the parts that tensor
parallelism splits. A transformer spec is turned into such a list by
:func:`lyra_ray.parallelism.transformer.transformer_layers`; a user may also give the
list directly (a model that is not a transformer, or measured per-layer costs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


def _finite(name: str, v: float, positive: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    if v < 0 or (positive and v == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'}, got {v!r}")


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer's cost per sample.

    ``fwd_flops`` / ``bwd_flops``: arithmetic in the forward and backward pass.
    ``param_bytes``: half-precision weights (training state is 8x this: weights, grads,
    fp32 master copy and two Adam moments). ``act_bytes``: activations kept for the
    backward pass without recomputation. ``out_bytes``: the output handed to the next
    layer (what crosses a pipeline boundary, and what a recomputing stage keeps).
    ``gemm_width``: the narrowest matrix dimension before tensor splitting; narrow
    matrix multiplies run further from peak. ``tp_comm_bytes``: bytes all-reduced in
    one forward pass under tensor parallelism (the backward pass moves as much); ``None``
    means the layer cannot be split across GPUs. ``mem_bytes`` / ``mem_bytes_replicated``:
    memory-bound traffic (softmax, dropout, layer norm) in the forward pass, split by
    tensor parallelism or repeated on every tensor rank.
    """

    name: str
    fwd_flops: float
    bwd_flops: float
    param_bytes: float
    act_bytes: float
    out_bytes: float
    gemm_width: float | None = None
    tp_comm_bytes: float | None = 0.0
    mem_bytes: float = 0.0
    mem_bytes_replicated: float = 0.0
    act_bytes_replicated: float = 0.0
    """Activations every tensor rank keeps whole (layer-norm and dropout inputs)."""
    checkpointed: bool = True
    """Whether activation recomputation covers this layer (Megatron-LM does not
    recompute the output head, and the PTD-P paper's FLOP count assumes so)."""
    shared_params: bool = False
    """The weights are a copy of another layer's (an output head tied to the input
    embedding): not counted in the model's size, and held once when both share a stage."""

    def __post_init__(self) -> None:
        _finite("fwd_flops", self.fwd_flops)
        _finite("bwd_flops", self.bwd_flops)
        for f in ("param_bytes", "act_bytes", "out_bytes", "mem_bytes", "mem_bytes_replicated"):
            _finite(f, getattr(self, f))
        _finite("act_bytes_replicated", self.act_bytes_replicated)
        if self.gemm_width is not None:
            _finite("gemm_width", self.gemm_width, positive=True)
        if self.tp_comm_bytes is not None:
            _finite("tp_comm_bytes", self.tp_comm_bytes)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model as a list of layers, plus what limits tensor parallelism.

    ``max_tp`` is the largest tensor-parallel degree the model can be split into (a
    transformer: its attention heads); ``tp_divides`` lists numbers the degree must
    divide (heads, hidden size, vocabulary) so every rank gets an equal share.
    """

    name: str
    layers: tuple[LayerCost, ...]
    max_tp: int = 1
    tp_divides: tuple[int, ...] = ()
    seq_len: int | None = None
    hidden: int | None = None
    ends_attached: bool = False
    """The first and last layers are an embedding and an output head, which Megatron-LM's
    even split adds to the first and last stages rather than counting as layers."""
    meta: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a model needs at least one layer")
        if any(layer.tp_comm_bytes is None for layer in self.layers) and self.max_tp > 1:
            raise ValueError("a layer without tp_comm_bytes cannot be tensor-split: max_tp 1")

    @property
    def params(self) -> float:
        """Parameter count (half-precision bytes / 2)."""
        return sum(x.param_bytes for x in self.layers if not x.shared_params) / 2

    def train_flops_per_sample(self, recompute: bool) -> float:
        """Forward + backward FLOPs per sample, plus the repeated forward if recomputing
        (for a GPT this is the PTD-P paper's Eq. 3 divided by the batch size)."""
        f = sum(x.fwd_flops + x.bwd_flops for x in self.layers)
        if recompute:
            f += sum(x.fwd_flops for x in self.layers if x.checkpointed)
        return f

    def tp_ok(self, t: int) -> bool:
        return t <= self.max_tp and all(n % t == 0 for n in self.tp_divides)


def layer_list(name: str, layers: Sequence[LayerCost]) -> ModelSpec:
    """A model given as layers; tensor parallelism only if every layer says how."""
    splittable = all(layer.tp_comm_bytes is not None for layer in layers)
    return ModelSpec(name, tuple(layers), max_tp=64 if splittable else 1)
