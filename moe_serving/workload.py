"""Synthetic request batches with a controllable topic mix.

WHY: the model's token embeddings cluster by topic (``model.py``), so the experts a batch
needs depend on its topic mix. Serving traffic whose mix drifts (or simply varies batch to
batch) is exactly the case where a moving average of past loads is wrong and an estimate
from the tokens' own routes is right.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt
import torch


class TopicVocab(Protocol):
    """What sampling needs of a model: its vocabulary, cut into ``topics`` equal ranges
    (``model.MoEConfig``, ``hf_moe.HFMoE``)."""

    @property
    def vocab(self) -> int: ...
    @property
    def topics(self) -> int: ...


def topic_mix(topics: int, favoured: list[int], weight: float = 0.85) -> npt.NDArray[np.float64]:
    """A mix that puts ``weight`` on the ``favoured`` topics and the rest evenly elsewhere."""
    mix = np.full(topics, (1.0 - weight) / max(1, topics - len(favoured)))
    mix[favoured] = weight / len(favoured)
    out: npt.NDArray[np.float64] = mix / mix.sum()
    return out


def sample_batch(
    cfg: TopicVocab,
    rng: np.random.Generator,
    batch: int,
    seq: int,
    mix: npt.NDArray[np.float64] | None = None,
) -> torch.Tensor:
    """``batch`` sequences of ``seq`` tokens; each sequence draws one topic from ``mix``."""
    mix = np.full(cfg.topics, 1.0 / cfg.topics) if mix is None else mix
    per_topic = cfg.vocab // cfg.topics
    topics = rng.choice(cfg.topics, size=batch, p=mix)
    offs = rng.integers(0, per_topic, size=(batch, seq))
    return torch.as_tensor(topics[:, None] * per_topic + offs, dtype=torch.long)
