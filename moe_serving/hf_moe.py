"""A real MoE architecture, from ``transformers``, built in-process with random weights.

WHY ``transformers``' own classes: the service must serve what teams deploy (Mixtral,
Qwen2-MoE, DeepSeek-V3), not a model of our own. ``AutoConfig.for_model(arch, **config)``
and ``AutoModelForCausalLM.from_config`` build any of them from a small config with random
weights; nothing is downloaded. A user names the architecture (a ``model_type`` that
``transformers`` knows) and any config fields (:mod:`lyra_ray.moe_serving.hf_arch`, with
small defaults for the three named above).

Recent ``transformers`` stores a layer's experts as fused 3-D tensors (``gate_up_proj``
[E, 2*inter, dim], ``down_proj`` [E, dim, inter]) in one module whose forward is
``experts(hidden, top_k_index, top_k_weights)``. The unit Lina replicates and places is
one expert's slice of those (``experts.ExpertSlice``). ``HFMoE`` swaps each layer's experts
module for a hook (``_ExpertsHook``): the model's own forward (attention, router, shared
experts, norms) runs unchanged, and only the routed experts' work goes where the caller
says: in-process (``local_experts``), or to the devices that hold the slices (the Serve
ingress, ``lyra_ray/serving/moe_app.py``).

How popularity skew reaches the model: a model with random weights routes nearly evenly,
and real traffic does not. Each MoE layer's router gets a bias, calibrated on a fixed
seeded profiling sample so that the *realised* share of picks matches a target per layer
(``calibrate``): a Zipf target from ``skew``, or measured loads mapped onto the model's
experts (``popularity.deepseek_targets``). DeepSeek-V3's router already has that bias
(``e_score_correction_bias``, its own load-balancing term, added to the scores it ranks);
for softmax top-k routers (Mixtral, Qwen2-MoE) a forward hook adds it to the logits
before the top-k (``_SoftmaxBias``). Token embeddings are clustered by topic, so a batch's
topic mix moves popularity (the drift that phase 2 follows).

Pure of Ray; imports transformers only inside ``HFMoE``.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from torch import nn

from lyra_ray.moe_serving.experts import ExpertSlice, swiglu
from lyra_ray.moe_serving.hf_arch import ArchSpec, build_config

PROFILE_SEQS_PER_TOPIC, PROFILE_SEQ, PROFILE_SEED_OFFSET = 16, 32, 7919
CALIB_ITERS, CALIB_DAMPING, CALIB_TOL = 60, 0.5, 0.01
GATE_SCALE = 1.5

Floats = npt.NDArray[np.float64]
ExpertsFn = Callable[[int, Any, Any, Any], Any]
"""``(moe layer, hidden [N, dim], top_k_index [N, k], top_k_weights [N, k]) -> [N, dim]``:
what a layer's experts module computes, routed experts only."""

EXPERTS: contextvars.ContextVar[ExpertsFn | None] = contextvars.ContextVar(
    "lyra_moe_experts", default=None
)
"""The experts function of the forward running in this context (a request's, in the
ingress: each request runs in its own thread and context); None: in-process."""


def local_experts(slices: list[ExpertSlice], hidden: Any, idx: Any, weights: Any) -> Any:
    """The routed experts in-process, one slice at a time, as the devices run them."""
    import torch

    x = hidden.detach().float().numpy()
    out = np.zeros_like(x)
    k_idx = idx.numpy()
    w = weights.detach().float().numpy()
    for e in np.unique(k_idx):
        rows, slot = np.nonzero(k_idx == e)
        y = swiglu(x[rows], slices[int(e)])
        np.add.at(out, rows, y * w[rows, slot][:, None])
    return torch.from_numpy(out).to(hidden.dtype)


def slice_of(experts: Any, e: int) -> ExpertSlice:
    """Expert ``e``'s slice of a fused experts module, as numpy (what a device holds)."""
    gu = experts.gate_up_proj[e].detach().float().numpy().copy()
    down = experts.down_proj[e].detach().float().numpy().copy()
    return ExpertSlice(gu, down)


class HFMoE:
    """A ``transformers`` MoE causal LM with random weights, its MoE layers exposed.

    ``moe layer`` indices count MoE blocks only (DeepSeek-V3's dense first layers and
    Qwen2-MoE's ``mlp_only_layers`` have none), in model order.
    """

    def __init__(self, spec: ArchSpec) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(spec.seed)
        self.spec = spec
        self.config = build_config(spec)
        act = getattr(self.config, "hidden_act", None)
        if act not in ("silu", "swish"):
            raise ValueError(f"hf_config.hidden_act: {act!r}; lyra's devices run SwiGLU (silu)")
        self.model = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
            self.config, attn_implementation="eager"
        )
        self.model.eval().requires_grad_(False)
        self.blocks = [m for m in self.model.modules() if _is_moe_block(m)]
        if not self.blocks:
            raise ValueError(
                f"arch: {spec.arch!r} has no MoE block with fused 3-D experts "
                "(gate_up_proj [E, 2*inter, dim], down_proj [E, dim, inter])"
            )
        self.experts_modules = [b.experts for b in self.blocks]
        self.layers = len(self.blocks)
        self.experts = int(self.experts_modules[0].gate_up_proj.shape[0])
        self.dim = int(self.experts_modules[0].gate_up_proj.shape[2])
        self.inter = int(self.experts_modules[0].down_proj.shape[2])
        self.top_k = int(self.blocks[0].gate.top_k)
        self.vocab = int(self.config.vocab_size)
        self.topics = spec.topics
        if self.vocab % self.topics:
            raise ValueError(f"hf_config.vocab_size ({self.vocab}) must be a multiple of topics")
        self._cluster_embeddings(spec)
        self._scale_routers(spec)
        self.biases = [_RouterBias.attach(b.gate, self.experts) for b in self.blocks]
        self.slices = [
            [slice_of(ex, e) for e in range(self.experts)] for ex in self.experts_modules
        ]
        """Every expert's slice, as numpy: what the devices are given, and what the
        in-process path computes with (the weights never change after the build)."""
        for layer, block in enumerate(self.blocks):
            block.experts = _ExpertsHook(layer, block.experts, self.slices[layer])

    # ---------------------------------------------------------------- structure
    def expert_slice(self, layer: int, e: int) -> ExpertSlice:
        return self.slices[layer][e]

    def _cluster_embeddings(self, spec: ArchSpec) -> None:
        """Token embeddings around one centre per topic (``vocab / topics`` consecutive ids
        each), scaled like the model's own init: a batch's topic mix moves its routing."""
        import torch

        gen = torch.Generator().manual_seed(spec.seed + 1)
        emb = self.model.get_input_embeddings().weight
        scale = float(getattr(self.config, "initializer_range", 0.02)) * math.sqrt(self.dim)
        centers = torch.randn(self.topics, self.dim, generator=gen)
        topic = torch.arange(self.vocab) * self.topics // self.vocab
        noise = torch.randn(self.vocab, self.dim, generator=gen)
        with torch.no_grad():
            emb.copy_((centers[topic] + spec.token_noise * noise) * scale / math.sqrt(self.dim))

    def _scale_routers(self, spec: ArchSpec) -> None:
        """Router weights drawn with std ``GATE_SCALE / sqrt(dim)``: the hidden state the
        router sees is RMS-normalised, so its logits spread by ~``GATE_SCALE``, as a
        trained router's do. The init's 0.02 leaves a spread of ~0.2: routing then hardly
        depends on the token, and a bias of a tenth flips every pick."""
        import torch

        gen = torch.Generator().manual_seed(spec.seed + 2)
        with torch.no_grad():
            for b in self.blocks:
                w = b.gate.weight
                w.copy_(torch.randn(w.shape, generator=gen) * GATE_SCALE / math.sqrt(self.dim))

    # ---------------------------------------------------------------- forward
    def run(self, tokens: Any, fn: ExpertsFn | None = None) -> tuple[Any, Any]:
        """Forward ``tokens`` [B, T] (ids); returns (last hidden state [B, T, dim], routes
        [L, B*T, k]), with the routed experts computed by ``fn`` (in-process when None)."""
        import torch

        routes: list[Any] = []

        def record(layer: int, hidden: Any, idx: Any, w: Any) -> Any:
            routes.append(idx)
            if fn is not None:
                return fn(layer, hidden, idx, w)
            return local_experts(self.slices[layer], hidden, idx, w)

        token = EXPERTS.set(record)
        try:
            with torch.no_grad():
                out = self.model.model(input_ids=torch.as_tensor(tokens, dtype=torch.long))
        finally:
            EXPERTS.reset(token)
        return out.last_hidden_state, torch.stack(routes)

    def routes(self, tokens: Any) -> npt.NDArray[np.int64]:
        """The routers' picks [L, B*T, k] for ``tokens`` (in-process)."""
        routes: npt.NDArray[np.int64] = self.run(tokens)[1].numpy().astype(np.int64)
        return routes

    # ---------------------------------------------------------------- popularity
    def profile_tokens(self) -> npt.NDArray[np.int64]:
        """A fixed, exactly topic-balanced sample [topics * seqs, seq] (seeded)."""
        rng = np.random.default_rng(self.spec.seed + PROFILE_SEED_OFFSET)
        per = self.vocab // self.topics
        topic = np.repeat(np.arange(self.topics), PROFILE_SEQS_PER_TOPIC)
        offs = rng.integers(0, per, size=(topic.size, PROFILE_SEQ))
        out: npt.NDArray[np.int64] = (topic[:, None] * per + offs).astype(np.int64)
        return out

    def pick_shares(self, tokens: npt.NDArray[np.int64]) -> Floats:
        """Share of the routers' picks [L, E] each expert gets on ``tokens``."""
        r = self.routes(tokens)
        counts = np.stack([np.bincount(x.ravel(), minlength=self.experts) for x in r])
        out: Floats = counts / counts.sum(1, keepdims=True)
        return out

    def calibrate(self, target: Floats) -> float:
        """Fit every MoE layer's router bias so its share of picks on the profiling sample
        matches ``target`` [L, E] (rows summing to 1, each <= 1/top_k). Damped fixed-point
        steps ``b += d * scale * log(target / share)`` on all layers at once; a layer whose
        error rose goes back to its best bias and halves its step (pick counts are
        piecewise constant in the bias, and DeepSeek-V3's group-limited routing makes them
        jump). Returns the worst layer's max share error."""
        target = np.asarray(target, dtype=np.float64)
        if target.shape != (self.layers, self.experts):
            raise ValueError(
                f"target_load: shape {target.shape}, want [{self.layers}, {self.experts}]"
            )
        tokens = self.profile_tokens()
        floor = 0.5 / (tokens.size * self.top_k)
        best = [b.get() for b in self.biases]
        best_err = np.full(self.layers, np.inf)
        damping = np.full(self.layers, CALIB_DAMPING)
        for _ in range(CALIB_ITERS):
            share = self.pick_shares(tokens)
            err = np.abs(share - target).max(1)
            for layer, bias in enumerate(self.biases):
                if err[layer] < best_err[layer]:
                    best_err[layer], best[layer] = err[layer], bias.get()
                else:  # overshot: back to the best bias, with half the step
                    damping[layer] *= 0.5
                    bias.set(best[layer])
                    share[layer] = np.nan
            if best_err.max() < CALIB_TOL:
                break
            for layer, bias in enumerate(self.biases):
                if np.isnan(share[layer]).any() or best_err[layer] < CALIB_TOL:
                    continue
                step = np.log(np.maximum(target[layer], floor) / np.maximum(share[layer], floor))
                bias.set(bias.get() + damping[layer] * bias.scale * step)
        for bias, b in zip(self.biases, best, strict=True):
            bias.set(b)
        return float(best_err.max())


def _is_moe_block(m: Any) -> bool:
    ex = getattr(m, "experts", None)
    gu, down = getattr(ex, "gate_up_proj", None), getattr(ex, "down_proj", None)
    fused = gu is not None and down is not None and gu.dim() == 3 and down.dim() == 3
    plain = not getattr(ex, "has_bias", False) and not getattr(ex, "is_transposed", False)
    return fused and plain and hasattr(getattr(m, "gate", None), "top_k")


class _RouterBias:
    """A router's bias on the scores it ranks: DeepSeek-V3's own ``e_score_correction_bias``,
    or (softmax top-k routers) one added to the logits by a forward hook."""

    def __init__(self, router: Any, experts: int, native: bool) -> None:
        import torch

        self.router, self.native = router, native
        self.bias = torch.zeros(experts)
        # the score the bias moves: logits (softmax routers) or sigmoid scores (DeepSeek)
        self.scale = 0.3 if native else 1.0

    @staticmethod
    def attach(router: Any, experts: int) -> _RouterBias:
        native = hasattr(router, "e_score_correction_bias")
        rb = _RouterBias(router, experts, native)
        if not native:
            router.register_forward_hook(rb._hook)
        return rb

    def get(self) -> Floats:
        src = self.router.e_score_correction_bias if self.native else self.bias
        out: Floats = src.detach().double().numpy().copy()
        return out

    def set(self, b: Floats) -> None:
        import torch

        t = torch.as_tensor(b - b.mean(), dtype=torch.float32)
        if self.native:
            self.router.e_score_correction_bias.copy_(t)
        else:
            self.bias = t

    def _hook(self, router: Any, _inputs: Any, out: Any) -> Any:
        """Softmax top-k again on the biased logits (the router's own rule: normalise the
        top-k weights where it does; Mixtral always, Qwen2-MoE per ``norm_topk_prob``)."""
        import torch

        logits = out[0] + self.bias.to(out[0].dtype)
        probs = torch.softmax(logits.float(), dim=-1)
        top, idx = torch.topk(probs, router.top_k, dim=-1)
        if getattr(router, "norm_topk_prob", True):
            top = top / top.sum(-1, keepdim=True)
        return logits, top.to(out[1].dtype), idx


class _ExpertsHook(nn.Module):
    """Stands in for a layer's fused experts module: the same call, routed to the experts
    function of the running context (``EXPERTS``), in-process when there is none. The
    fused module stays inside it (``inner``), so its weights stay the model's."""

    def __init__(self, layer: int, experts: Any, slices: list[ExpertSlice]) -> None:
        super().__init__()
        self.layer, self.inner, self.slices = layer, experts, slices

    def forward(self, hidden: Any, top_k_index: Any, top_k_weights: Any) -> Any:
        fn = EXPERTS.get()
        if fn is None:
            return local_experts(self.slices, hidden, top_k_index, top_k_weights)
        return fn(self.layer, hidden, top_k_index, top_k_weights)
