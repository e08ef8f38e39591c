"""GPT-style transformers as layer lists, and the named models ``lyra plan`` knows.

The per-layer numbers follow the two Megatron-LM papers the planner is checked against:

* FLOPs: a layer's forward pass is ``24 s h^2 + 4 s^2 h`` per sequence, its backward
  twice that; the output head adds ``2 s h V`` forward. With recomputation this is the
  PTD-P paper's Eq. 3, ``96 B s l h^2 (1 + s/6h + V/16lh)``.
* Activations: Korthikanti et al. 2022 ("Reducing activation recomputation"), without
  sequence parallelism: ``s h (10 + 24/t + 5 a s/(h t))`` bytes per layer and sequence.
* Tensor parallelism (Megatron-style): two all-reduces of the ``s x h`` output in the
  forward pass, two in the backward pass; heads are split across ranks.

The memory-bound traffic is this module's own estimate of the fused kernels of that
code base (scale-mask-softmax and dropout over ``a s^2`` scores, bias-GeLU over
``4 s h``, two layer norms and two bias-dropout-adds over ``s h``).

Attention is a property of the model (``Transformer.attention``) because it changes
what a layer moves and keeps, not what it computes:

* ``standard`` (Megatron-LM 2021, the PTD-P paper's A100 runs): the ``a s^2`` score
  matrix is written, soft-maxed, dropped out and read back (``9 a s^2`` bytes of HBM
  traffic per forward pass) and kept for the backward pass (Korthikanti's ``5 a s^2``);
* ``flash`` (FlashAttention, PyTorch's ``scaled_dot_product_attention``; the default): the
  scores live in on-chip tiles and never reach HBM; the backward pass recomputes them
  from Q, K, V and the fp32 log-sum-exp per row (``4 a s`` bytes kept). Its FLOPs are
  counted as the standard layer's (the PTD-P count): a causal kernel skips the masked
  half but its backward recomputes the scores, and the measured H200 layers are timed
  against this count (``cost.FITTED``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lyra_ray.parallelism.layers import LayerCost, ModelSpec

Attention = Literal["flash", "standard"]
ATTENTION: tuple[Attention, ...] = ("flash", "standard")
"""How a model's attention runs (module docstring): ``flash`` unless it says otherwise."""


@dataclass(frozen=True, slots=True)
class Transformer:
    """A decoder-only transformer: layers, hidden size, heads, sequence length, vocabulary,
    and whether its attention is ``flash`` (the default) or ``standard``."""

    layers: int
    hidden: int
    heads: int
    seq_len: int = 2048
    vocab: int = 51200
    attention: Attention = "flash"

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "seq_len", "vocab"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{f} must be an integer >= 1, got {v!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention must be 'flash' or 'standard', got {self.attention!r}")

    @property
    def params(self) -> float:
        """The PTD-P paper's Eq. 2: ``12 l h^2 (1 + 13/12h + (V + s)/12lh)``."""
        h, s, v, n = self.hidden, self.seq_len, self.vocab, self.layers
        return 12 * n * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * n * h))


def transformer_layers(tf: Transformer, name: str = "transformer") -> ModelSpec:
    """The layer list of ``tf``: embedding, ``layers`` identical blocks, output head."""
    h, a, s, v = float(tf.hidden), float(tf.heads), float(tf.seq_len), float(tf.vocab)
    block_fwd = 24 * s * h * h + 4 * s * s * h
    if tf.attention == "standard":
        scores_kept, scores_moved = 5 * a * s * s, 9 * a * s * s
    else:  # flash: only the fp32 log-sum-exp per head and row is kept; nothing moves
        scores_kept, scores_moved = 4 * a * s, 0.0
    embedding = LayerCost(
        name="embedding",
        fwd_flops=0.0,
        bwd_flops=0.0,
        param_bytes=2 * (v * h + s * h),
        act_bytes=0.0,
        act_bytes_replicated=s * h,  # dropout mask
        out_bytes=2 * s * h,
        tp_comm_bytes=2 * s * h,  # vocabulary-parallel lookup: one all-reduce
        mem_bytes_replicated=6 * s * h,
        checkpointed=False,
    )
    block = LayerCost(
        name="block",
        fwd_flops=block_fwd,
        bwd_flops=2 * block_fwd,
        param_bytes=2 * (12 * h * h + 13 * h),
        act_bytes=24 * s * h + scores_kept,
        act_bytes_replicated=10 * s * h,
        out_bytes=2 * s * h,
        gemm_width=h,
        tp_comm_bytes=2 * (2 * s * h),
        mem_bytes=scores_moved + 16 * s * h,
        mem_bytes_replicated=22 * s * h,
    )
    head = LayerCost(
        name="head",
        fwd_flops=2 * s * h * v,
        bwd_flops=4 * s * h * v,
        param_bytes=2 * v * h,
        act_bytes=6 * s * v,  # half-precision logits and their fp32 softmax
        act_bytes_replicated=4 * s * h,
        out_bytes=4 * s,
        gemm_width=h,
        tp_comm_bytes=2 * s * h,
        mem_bytes=16 * s * v,
        mem_bytes_replicated=4 * s * h,
        checkpointed=False,
        shared_params=True,
    )
    return ModelSpec(
        name=name,
        layers=(embedding, *([block] * tf.layers), head),
        max_tp=tf.heads,
        tp_divides=(tf.heads, tf.hidden),
        seq_len=tf.seq_len,
        hidden=tf.hidden,
        ends_attached=True,
        meta={"layers": tf.layers, "heads": tf.heads, "vocab": tf.vocab},
    )


ZOO: dict[str, Transformer] = {
    # The PTD-P paper's weak-scaling models (Table 1; seq 2048, vocab 51,200). Standard
    # attention: the paper ran Megatron-LM's fused softmax on A100s, before FlashAttention,
    # and its table (tests/data/ptdp_weak_scaling.json) is reproduced with it.
    "gpt-1.7b": Transformer(24, 2304, 24, attention="standard"),
    "gpt-3.6b": Transformer(30, 3072, 32, attention="standard"),
    "gpt-7.5b": Transformer(36, 4096, 32, attention="standard"),
    "gpt-18b": Transformer(40, 6144, 48, attention="standard"),
    "gpt-39b": Transformer(48, 8192, 64, attention="standard"),
    "gpt-76b": Transformer(60, 10240, 80, attention="standard"),
    "gpt-145b": Transformer(80, 12288, 96, attention="standard"),
    "gpt-310b": Transformer(96, 16384, 128, attention="standard"),
    "gpt-530b": Transformer(105, 20480, 128, attention="standard"),
    "gpt-1t": Transformer(128, 25600, 160, attention="standard"),
    # The paper's Figure 13 model (162.2B by Eq. 2), the same setting.
    "gpt-162b": Transformer(32, 20480, 128, attention="standard"),
    # GPT-3 and smaller members of its family, for clusters of a few GPUs: shapes a job
    # trains today, so with flash attention (a job may say ``attention: standard``).
    "gpt-175b": Transformer(96, 12288, 96),
    "gpt-350m": Transformer(24, 1024, 16),
    "gpt-1.3b": Transformer(24, 2048, 16),
    "gpt-2.7b": Transformer(32, 2560, 32),
    "gpt-6.7b": Transformer(32, 4096, 32),
    "gpt-13b": Transformer(40, 5120, 40),
}
"""Named models for ``lyra plan --model`` and a job spec's ``model:`` field."""


def zoo_model(name: str) -> ModelSpec:
    """The named model as a layer list; ``KeyError`` if the name is unknown."""
    return transformer_layers(ZOO[name.lower()], name.lower())
