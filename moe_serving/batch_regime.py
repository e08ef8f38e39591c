"""The batch sizes a service sees: the input of a plan made for the batch regime.

WHY a histogram and not one number or a threshold: an expert's time is flat below its knee
and linear above it (``expert_time.py``), so the best placement depends on the whole mix of
step sizes a service runs. A service that runs mostly decode steps and a few prefills wants
the placement that minimises the *expected* step time over that mix; a mean batch size
would put both at the knee, and a decode/prefill threshold would flip the plan on noise.

A step's size is the routed tokens of one MoE layer in one step (tokens x top-k). Sizes are
kept in log2 buckets (a bucket's representative is the weighted mean of the sizes seen in
it), with exponential decay per observation so the plan follows a service whose mix moves.

Pure: numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Regime = tuple[tuple[float, float], ...]
"""``((tokens per step, weight), ...)``: the weights are positive and sum to 1."""


def check_regime(pairs: Iterable[tuple[float, float]], what: str = "regime") -> Regime:
    """Normalised ``(tokens, weight)`` pairs; ValueError names ``what`` when they are unusable
    (empty, a size <= 0, a weight < 0 or not finite, all weights 0)."""
    out = [(float(t), float(w)) for t, w in pairs]
    if not out:
        raise ValueError(f"{what}: no batch sizes")
    for t, w in out:
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"{what}: tokens per step must be finite and > 0, got {t}")
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"{what}: weights must be finite and >= 0, got {w}")
    total = sum(w for _, w in out)
    if total <= 0:
        raise ValueError(f"{what}: the weights are all 0")
    return tuple((t, w / total) for t, w in out if w > 0)


def parse_regime(text: str, what: str = "--batch-tokens") -> Regime:
    """``"64"`` (one size) or ``"64:0.9,8192:0.1"`` (sizes with weights), as the CLI takes it."""
    pairs: list[tuple[float, float]] = []
    for part in text.split(","):
        size, _, weight = part.strip().partition(":")
        try:
            pairs.append((float(size), float(weight) if weight else 1.0))
        except ValueError:
            raise ValueError(f"{what}: {part.strip()!r} is not TOKENS or TOKENS:WEIGHT") from None
    return check_regime(pairs, what)


class BatchHistogram:
    """Decayed counts of the step sizes seen, in log2 buckets; ``regime()`` is the plan's
    input. Until anything is seen it answers ``prior`` (the size the service expects)."""

    def __init__(self, prior: float, half_life: float = 200.0) -> None:
        if not (math.isfinite(prior) and prior > 0):
            raise ValueError(f"batch histogram: prior must be > 0, got {prior}")
        if not (math.isfinite(half_life) and half_life > 0):
            raise ValueError(f"batch histogram: half_life must be > 0, got {half_life}")
        self.prior = float(prior)
        self.keep = 0.5 ** (1.0 / half_life)
        self.weight: dict[int, float] = {}
        self.tokens: dict[int, float] = {}  # weighted sum of sizes per bucket

    def observe(self, tokens_per_step: float, count: float = 1.0) -> None:
        """One step (or ``count`` steps) of this size; older ones fade by the half-life."""
        if not (math.isfinite(tokens_per_step) and tokens_per_step > 0):
            return  # an empty step routes nothing: no size to plan for
        for b in self.weight:
            self.weight[b] *= self.keep**count
            self.tokens[b] *= self.keep**count
        b = math.floor(math.log2(tokens_per_step))
        self.weight[b] = self.weight.get(b, 0.0) + count
        self.tokens[b] = self.tokens.get(b, 0.0) + count * tokens_per_step

    @property
    def seen(self) -> float:
        return sum(self.weight.values())

    def regime(self, max_sizes: int = 4) -> Regime:
        """The ``max_sizes`` heaviest buckets as ``(mean size, weight)``; the prior when
        nothing was seen. WHY a cap: each size adds candidate plans to the planner."""
        live = sorted(((w, b) for b, w in self.weight.items() if w > 1e-9), reverse=True)[
            :max_sizes
        ]
        if not live:
            return ((self.prior, 1.0),)
        return check_regime([(self.tokens[b] / w, w) for w, b in sorted(live, key=lambda x: x[1])])


def regime_sizes(regime: Sequence[tuple[float, float]]) -> list[float]:
    return [t for t, _ in regime]
