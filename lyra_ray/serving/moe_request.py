"""What a request to the MoE service may carry: its tokens, or the topic mix to sample.

WHY its own module: the ingress is a Serve deployment; the body's checks are plain numpy and
are tested without a cluster. Bad input is refused with a message naming the field
(the ingress answers 400 with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def check_tokens(raw: Any, vocab: int) -> npt.NDArray[np.int64]:
    """A rectangular [B, T] array of token ids in [0, vocab); ValueError names the field."""
    ok = isinstance(raw, list) and 0 < len(raw) <= 256
    ok = ok and all(isinstance(r, list) and 0 < len(r) <= 512 for r in raw)
    if not ok or len({len(r) for r in raw}) != 1:
        raise ValueError("field 'tokens': expected 1-256 rows of 1-512 token ids, all as long")
    if not all(isinstance(t, int) and not isinstance(t, bool) for r in raw for t in r):
        raise ValueError("field 'tokens': token ids must be integers")
    arr = np.asarray(raw, dtype=np.int64)
    if arr.min() < 0 or arr.max() >= vocab:
        raise ValueError(f"field 'tokens': token ids must be in [0, {vocab})")
    return arr


def check_topics(raw: Any, topics: int) -> npt.NDArray[np.float64]:
    """A topic mix: ``topics`` non-negative finite weights, not all zero, normalised.

    WHY: a load generator shifts the traffic's topic mix (and with it which experts are
    popular) by sending it; the live drift test and the serving benchmark do.
    """
    ok = isinstance(raw, list) and len(raw) == topics
    ok = ok and all(isinstance(w, int | float) and not isinstance(w, bool) for w in raw)
    if not ok:
        raise ValueError(f"field 'topics': expected a list of {topics} numbers")
    mix = np.asarray(raw, dtype=np.float64)
    if not np.all(np.isfinite(mix)) or mix.min() < 0 or mix.sum() <= 0:
        raise ValueError("field 'topics': weights must be finite, >= 0 and not all 0")
    out: npt.NDArray[np.float64] = mix / mix.sum()
    return out


def request_tokens(body: Any, cfg: Any, rng: np.random.Generator, batch: int, seq: int) -> Any:
    """The request's token ids [B, T]; a body without ``tokens`` gets a sampled batch
    (``cfg``: the service's ``MoEConfig``), its topic mix the body's ``topics`` or drawn per
    request (what load tests send)."""
    from lyra_ray.moe_serving.workload import sample_batch

    body = body if isinstance(body, dict) else {}
    raw = body.get("tokens")
    if raw is None:
        topics = body.get("topics")
        if topics is not None:
            mix = check_topics(topics, cfg.topics)
        else:
            mix = rng.dirichlet(np.full(cfg.topics, 0.5))
        return sample_batch(cfg, rng, batch, seq, mix).numpy()
    return check_tokens(raw, cfg.vocab)
