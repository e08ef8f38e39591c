"""A seeded stream of synthetic routes whose traffic shifts mid-stream.

WHY on top of ``model.py``: the synthetic MoE model already has the two knobs the path
estimate depends on: ``correlation`` (layer l+1's gate rows are ``corr`` x layer l's plus
noise, so a token keeps its route through the layers) and topic-clustered tokens
(``workload.py``), whose mix moves popularity. This module only drives it: every batch draws
its own topic mix around a base mix (Dirichlet), and at ``shift_at`` the base mix moves to
other topics, so the counted (marginal) load of the past batches goes stale.

The model's ``correlation`` is a knob on the gate weights, not the share of tokens whose
route is predictable; ``path_information`` measures the latter on a stream (how often the
most likely next expert given the previous one is right, against the most popular expert).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from lyra_ray.moe_serving.model import MoEConfig, MoEModel
from lyra_ray.moe_serving.workload import sample_batch, topic_mix

Routes = npt.NDArray[np.int64]


@dataclass(frozen=True)
class StreamConfig:
    """The traffic: batches of ``seqs`` x ``seq`` tokens; base mix favours ``before`` topics,
    then ``after`` topics from batch ``shift_at`` on; each batch's mix ~ Dirichlet(alpha x base)."""

    batches: int = 120
    shift_at: int = 60
    seqs: int = 256
    seq: int = 32
    before: tuple[int, ...] = (0,)
    after: tuple[int, ...] = (2,)
    weight: float = 0.85
    alpha: float = 20.0
    seed: int = 0
    model: MoEConfig = field(default_factory=MoEConfig)

    def __post_init__(self) -> None:
        if self.batches < 1 or not 0 <= self.shift_at <= self.batches:
            raise ValueError(
                f"batches ({self.batches}) must be >= 1 and shift_at ({self.shift_at}) in "
                f"[0, batches]"
            )
        if self.seqs < 1 or self.seq < 1:
            raise ValueError(f"seqs ({self.seqs}) and seq ({self.seq}) must be >= 1")
        for name, topics in (("before", self.before), ("after", self.after)):
            if not topics or any(not 0 <= t < self.model.topics for t in topics):
                raise ValueError(f"{name} must name topics in [0, {self.model.topics})")
        if not 0.0 < self.weight <= 1.0 or self.alpha <= 0:
            raise ValueError(f"weight ({self.weight}) in (0, 1] and alpha ({self.alpha}) > 0")


def route_stream(cfg: StreamConfig, model: MoEModel | None = None) -> Iterator[Routes]:
    """Routes ``[layers, seqs * seq, top_k]`` of each batch, in order; the same for a seed."""
    model = MoEModel(cfg.model) if model is None else model
    rng = np.random.default_rng(cfg.seed)
    topics = cfg.model.topics
    bases = (
        topic_mix(topics, list(cfg.before), cfg.weight),
        topic_mix(topics, list(cfg.after), cfg.weight),
    )
    for b in range(cfg.batches):
        mix = rng.dirichlet(cfg.alpha * bases[int(b >= cfg.shift_at)])
        tokens = sample_batch(cfg.model, rng, cfg.seqs, cfg.seq, mix)
        with torch.no_grad():
            _, routes = model.run(tokens)
        yield routes.numpy().astype(np.int64)


def path_information(routes: Routes) -> dict[str, float]:
    """How predictable layer l's top expert is from layer l-1's, on these routes [L, N, k]:
    ``from_path`` = share right when guessing the most frequent next expert per previous
    expert (in-sample), ``marginal`` = share right guessing the layer's most frequent one."""
    top1 = routes[:, :, 0]
    layers, n = top1.shape
    hit_path = hit_marg = 0
    for layer in range(1, layers):
        prev, nxt = top1[layer - 1], top1[layer]
        hit_marg += int(np.bincount(nxt).max())
        for a in np.unique(prev):
            hit_path += int(np.bincount(nxt[prev == a]).max())
    total = max(1, (layers - 1) * n)
    return {"from_path": hit_path / total, "marginal": hit_marg / total}
