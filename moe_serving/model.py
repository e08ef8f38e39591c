"""A small Mixture-of-Experts transformer in plain PyTorch, built from a seed.

WHY these knobs: Lina's gains come from two properties of real MoE routing — popularity is
skewed, and a token's expert at layer i predicts its expert at layer i+1. A randomly
initialised model has neither, so the gate is built to have both, with dials:

- ``skew``: the *realised* marginal popularity. The expert of rank r (ranks relabelled per
  layer with the correlation's permutation) receives a share ``(1 + r) ** -skew`` (normalised;
  for top-k capped at 1/k, since a token picks an expert at most once) of the gate's picks
  on the model's own balanced-topic traffic. A plain Zipf bias does not achieve that: the
  random gate weights dominate it, so the realised popularity depended on the seed (seed 1
  had two experts sharing layer 0's load). So each layer's bias is calibrated, layer by layer,
  on a fixed seeded profiling sample (``_calibrate_gates``).
- ``correlation``: layer l+1's gate rows are ``corr * (layer l's rows) + noise`` under a random
  relabelling of experts, so tokens keep their "route" through the layers.
- token embeddings cluster by topic (see ``workload.py``); a batch's topic mix moves the
  popularity, which is what breaks a moving-average (marginal) estimator.

The residual branches are scaled down (``residual_scale``) so the normalised hidden state the
gates see stays close to the embedding; that keeps cross-layer correlation controlled by the
gate knob rather than by whatever the random attention does.

The forward pass is split into ``embed`` / ``attend`` / ``route`` / ``combine`` so the Serve
ingress runs exactly the same code and only swaps how expert FFNs are executed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from lyra_ray.moe_serving.experts import ExpertWeights

# Gate calibration: a balanced profiling sample of PROFILE_SEQS_PER_TOPIC sequences per topic,
# PROFILE_SEQ tokens each, drawn from its own generator (seed + PROFILE_SEED_OFFSET) so the
# weights stay what the seed gives; damped fixed-point steps on the bias.
PROFILE_SEQS_PER_TOPIC = 32
PROFILE_SEQ = 32
PROFILE_SEED_OFFSET = 7919
CALIB_ITERS = 80
CALIB_DAMPING = 0.5
CALIB_TOL = 0.005


@dataclass(frozen=True)
class MoEConfig:
    """Shape and workload knobs of the synthetic MoE model."""

    vocab: int = 256
    dim: int = 32
    hidden: int = 64
    layers: int = 4
    experts: int = 8
    top_k: int = 1
    heads: int = 2
    skew: float = 1.0
    correlation: float = 0.9
    topics: int = 4
    token_noise: float = 1.0
    gate_scale: float = 1.5
    residual_scale: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= self.experts:
            raise ValueError(f"top_k must be in [1, experts], got {self.top_k}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        if not 0.0 <= self.correlation <= 1.0:
            raise ValueError(f"correlation must be in [0, 1], got {self.correlation}")
        if self.topics < 1 or self.vocab % self.topics:
            raise ValueError(f"vocab ({self.vocab}) must be a multiple of topics ({self.topics})")


@dataclass(frozen=True)
class Dispatch:
    """Tokens of one layer sent to one expert: their rows and their gate weights."""

    expert: int
    rows: Tensor  # int64 [n], rows into the flattened [B*T, dim] hidden state
    weight: Tensor  # float32 [n]


ExpertFn = Callable[[int, int, Tensor], Tensor]


class Attention(nn.Module):
    """Causal multi-head self-attention written out, so the op order is fixed and visible."""

    def __init__(self, dim: int, heads: int, out_scale: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        with torch.no_grad():
            self.out.weight.mul_(out_scale)
            self.out.bias.zero_()

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # [b, heads, t, dh]
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        out: Tensor = self.out(y)
        return out


class Expert(nn.Module):
    """One expert FFN: Linear -> SiLU -> Linear (same math as ``experts.expert_ffn``)."""

    def __init__(self, dim: int, hidden: int, out_scale: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        with torch.no_grad():
            self.fc2.weight.mul_(out_scale)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.fc2(nn.functional.silu(self.fc1(x)))
        return out

    def numpy_weights(self) -> ExpertWeights:
        def arr(t: Tensor) -> npt.NDArray[np.float32]:
            out: npt.NDArray[np.float32] = t.detach().cpu().numpy().astype(np.float32).copy()
            return out

        return ExpertWeights(
            arr(self.fc1.weight), arr(self.fc1.bias), arr(self.fc2.weight), arr(self.fc2.bias)
        )


class MoELayer(nn.Module):
    """Pre-norm block: attention, then a gated mixture of experts."""

    def __init__(self, cfg: MoEConfig, gate_w: Tensor, gate_b: Tensor) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg.dim, cfg.heads, cfg.residual_scale)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.gate = nn.Linear(cfg.dim, cfg.experts)
        with torch.no_grad():
            self.gate.weight.copy_(gate_w)
            self.gate.bias.copy_(gate_b)
        self.experts = nn.ModuleList(
            Expert(cfg.dim, cfg.hidden, cfg.residual_scale) for _ in range(cfg.experts)
        )


def _gate_params(cfg: MoEConfig, gen: torch.Generator) -> list[tuple[Tensor, Tensor]]:
    """Per-layer gate weights with Zipf bias and cross-layer correlation (see module doc)."""
    e, d = cfg.experts, cfg.dim
    w = torch.randn(e, d, generator=gen) / math.sqrt(d)
    b = -cfg.skew * torch.log1p(torch.arange(e, dtype=torch.float32))
    noise_mix = math.sqrt(max(0.0, 1.0 - cfg.correlation**2))
    out: list[tuple[Tensor, Tensor]] = []
    for layer in range(cfg.layers):
        if layer > 0:
            fresh = torch.randn(e, d, generator=gen) / math.sqrt(d)
            perm = torch.randperm(e, generator=gen)
            w = (cfg.correlation * w + noise_mix * fresh)[perm]
            b = b[perm]
        out.append((w * cfg.gate_scale, b.clone()))
    return out


def zipf_target(bias: Tensor, top_k: int) -> Tensor:
    """Pick shares proportional to ``exp(bias)``, water-filled under the top-k cap ``1/k``.

    ``exp(bias)`` of the initial Zipf bias is ``(1 + rank) ** -skew``. With top-k gating a
    token picks an expert at most once, so no expert can hold more than 1/k of the picks; the
    excess goes to the others in proportion to their own shares.
    """
    share = bias.double().exp()
    share = share / share.sum()
    cap = 1.0 / top_k
    capped = torch.zeros_like(share, dtype=torch.bool)
    for _ in range(share.numel()):
        free = ~capped
        rest = 1.0 - cap * int(capped.sum())
        share = torch.where(capped, torch.full_like(share, cap), share)
        share[free] = share[free] / share[free].sum() * rest
        over = free & (share > cap)
        if not over.any():
            break
        capped |= over
    return share.float()


def pick_shares(logits: Tensor, top_k: int) -> Tensor:
    """Share of the top-k picks [E] each expert gets for gate logits [N, E]."""
    idx = logits.topk(top_k, dim=-1).indices.reshape(-1)
    return torch.bincount(idx, minlength=logits.shape[1]).float() / idx.numel()


def fit_bias(logits: Tensor, bias: Tensor, target: Tensor, top_k: int) -> Tensor:
    """Bias such that ``pick_shares(logits + bias)`` matches ``target``: damped fixed point.

    ``b += damping * log(target / actual)`` raises the bias of under-picked experts. Counts
    are piecewise constant in ``b``, so the steps may hop around the target; the best bias
    seen (max abs share error) is kept.
    """
    b = bias.clone()
    best, best_err = b.clone(), math.inf
    floor = 0.5 / (logits.shape[0] * top_k)  # an expert nobody picks still gets a finite step
    for _ in range(CALIB_ITERS):
        share = pick_shares(logits + b, top_k)
        err = float((share - target).abs().max())
        if err < best_err:
            best, best_err = b.clone(), err
        if err < CALIB_TOL:
            break
        b = b + CALIB_DAMPING * torch.log(target / share.clamp_min(floor))
    return best - best.mean()


def profile_tokens(cfg: MoEConfig, seed: int, seqs_per_topic: int, seq: int) -> Tensor:
    """Exactly balanced topic mix: ``seqs_per_topic`` sequences of each topic [T*S, seq].

    Exact balance (not a random topic draw) keeps the sample's topic counts from moving the
    calibrated popularity.
    """
    gen = torch.Generator().manual_seed(seed)
    per_topic = cfg.vocab // cfg.topics
    topic = torch.arange(cfg.topics).repeat_interleave(seqs_per_topic)
    offs = torch.randint(0, per_topic, (topic.numel(), seq), generator=gen)
    return topic[:, None] * per_topic + offs


class MoEModel(nn.Module):
    """Embedding -> L x (attention, top-k gated experts) -> final norm."""

    def __init__(self, cfg: MoEConfig, calibrate_gates: bool = True) -> None:
        """Build the model from ``cfg.seed``.

        ``calibrate_gates=False`` skips the bias calibration; only for a caller that loads a
        state dict right after (the Serve ingress), which carries the calibrated biases.
        """
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.embedding = nn.Embedding(cfg.vocab, cfg.dim)
        with torch.no_grad():
            centers = torch.randn(cfg.topics, cfg.dim, generator=gen)
            topic = torch.arange(cfg.vocab) * cfg.topics // cfg.vocab
            self.embedding.weight.copy_(
                centers[topic] + cfg.token_noise * torch.randn(cfg.vocab, cfg.dim, generator=gen)
            )
        gates = _gate_params(cfg, gen)
        self.layers = nn.ModuleList(MoELayer(cfg, w, b) for w, b in gates)
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.eval()
        if calibrate_gates:
            seed = cfg.seed + PROFILE_SEED_OFFSET
            self._calibrate_gates(profile_tokens(cfg, seed, PROFILE_SEQS_PER_TOPIC, PROFILE_SEQ))

    @torch.no_grad()
    def _calibrate_gates(self, tokens: Tensor) -> None:
        """Fit each layer's gate bias to its Zipf target on ``tokens``, in layer order.

        In order because layer l's gate input depends on the routing of layers < l; the
        target's rank order is the one the initial (relabelled) Zipf bias carries.
        """
        k = self.cfg.top_k
        h = self.embed(tokens)
        for layer in range(self.cfg.layers):
            h = self.attend(layer, h)
            gate = self._block(layer).gate
            xn = self._block(layer).ln2(h).reshape(-1, self.cfg.dim)
            logits = xn @ gate.weight.T
            gate.bias.copy_(fit_bias(logits, gate.bias, zipf_target(gate.bias, k), k))
            h, _ = self._mixture(layer, h, self.expert_forward)

    def _block(self, layer: int) -> MoELayer:
        blk = self.layers[layer]
        assert isinstance(blk, MoELayer)
        return blk

    # --- the pieces the Serve ingress reuses -------------------------------------------
    def embed(self, tokens: Tensor) -> Tensor:
        out: Tensor = self.embedding(tokens)
        return out

    def attend(self, layer: int, h: Tensor) -> Tensor:
        blk = self._block(layer)
        out: Tensor = h + blk.attn(blk.ln1(h))
        return out

    def route(self, layer: int, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Normalised token vectors [N, dim], chosen experts [N, k] and their weights [N, k]."""
        blk = self._block(layer)
        xn = blk.ln2(h).reshape(-1, self.cfg.dim)
        probs = blk.gate(xn).softmax(-1)
        w, idx = probs.topk(self.cfg.top_k, dim=-1)
        if self.cfg.top_k > 1:
            w = w / w.sum(-1, keepdim=True)
        return xn, idx, w

    def dispatch(self, idx: Tensor, w: Tensor) -> list[Dispatch]:
        """Group token rows by chosen expert, in expert order (the combine order is fixed)."""
        out: list[Dispatch] = []
        for e in range(self.cfg.experts):
            rows, slots = (idx == e).nonzero(as_tuple=True)
            if rows.numel():
                out.append(Dispatch(e, rows, w[rows, slots]))
        return out

    def combine(self, h: Tensor, dispatches: list[Dispatch], outputs: list[Tensor]) -> Tensor:
        moe = torch.zeros(h.shape[0] * h.shape[1], h.shape[2], dtype=h.dtype)
        for d, y in zip(dispatches, outputs, strict=True):
            moe.index_add_(0, d.rows, y * d.weight[:, None])
        return h + moe.view_as(h)

    def expert_forward(self, layer: int, expert: int, x: Tensor) -> Tensor:
        out: Tensor = self._block(layer).experts[expert](x)
        return out

    def expert_weights(self, layer: int, expert: int) -> ExpertWeights:
        mod = self._block(layer).experts[expert]
        assert isinstance(mod, Expert)
        return mod.numpy_weights()

    def finish(self, h: Tensor) -> Tensor:
        out: Tensor = self.ln_f(h)
        return out

    # --- in-process forward ------------------------------------------------------------
    @torch.no_grad()
    def run(self, tokens: Tensor, expert_fn: ExpertFn | None = None) -> tuple[Tensor, Tensor]:
        """Forward ``tokens`` [B, T]; returns (output [B, T, dim], routes [L, B*T, k])."""
        fn = expert_fn or self.expert_forward
        h = self.embed(tokens)
        routes = []
        for layer in range(self.cfg.layers):
            h, idx = self._mixture(layer, self.attend(layer, h), fn)
            routes.append(idx)
        return self.finish(h), torch.stack(routes)

    def _mixture(self, layer: int, h: Tensor, fn: ExpertFn) -> tuple[Tensor, Tensor]:
        """Route, run the chosen experts through ``fn`` and combine: (new h, chosen experts)."""
        xn, idx, w = self.route(layer, h)
        ds = self.dispatch(idx, w)
        return self.combine(h, ds, [fn(layer, d.expert, xn[d.rows]) for d in ds]), idx
