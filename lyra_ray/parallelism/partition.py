"""Cutting a layer list into pipeline stages.

:func:`even_split` is Megatron-LM's rule: the same number of layers on every stage,
the input embedding riding on the first and the output head on the last. It is right for
identical layers on identical links and wrong otherwise: a 1.7B GPT's output head costs
almost two transformer blocks, and a boundary that crosses servers costs more than one
that stays on NVLink.

:func:`balanced_split` is DAPPLE's idea (Fan et al., PPoPP'21) in its simplest exact
form: minimise the slowest stage, where a stage's time is its layers' compute plus the
transfers over *its* boundaries (each boundary on its own link), subject to each stage's
memory fitting (a 1F1B stage ``k`` keeps ``p - k`` microbatches in flight, so early stages
may hold fewer layers). It is a bisection on the bottleneck time with a greedy
feasibility check, which is exact when a stage's cost grows with its layers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate


def even_split(n_layers: int, k: int, ends_attached: bool = False) -> tuple[int, ...]:
    """``k`` stage sizes covering ``n_layers`` layers as evenly as counts allow.

    With ``ends_attached`` the first and last layers (embedding, output head) are added
    to the first and last stages on top of an even split of the others, as Megatron-LM
    does; extra layers go to the first stages.
    """
    if k < 1 or n_layers < k:
        raise ValueError(f"cannot split {n_layers} layers into {k} non-empty stages")
    inner = n_layers - 2 if ends_attached and n_layers >= k + 2 else n_layers
    q, r = divmod(inner, k)
    sizes = [q + (1 if i < r else 0) for i in range(k)]
    if inner != n_layers:
        sizes[0] += 1
        sizes[-1] += 1
    return tuple(sizes)


@dataclass(frozen=True, slots=True)
class StageInputs:
    """Per-layer costs for one microbatch, and per-boundary link costs.

    ``time[i]``: layer ``i``'s forward + backward seconds. ``out[i]``: bytes it sends to
    the next layer. ``link[k]``: seconds per byte across boundary ``k`` (stage ``k`` to
    ``k + 1``); a boundary's transfer (activation forward, gradient back) is charged to
    both of its stages. ``static[i]``, ``act[i]``, ``work[i]``: bytes of training state,
    of activations kept per microbatch in flight, and of transient working memory;
    ``in_flight[k]``: microbatches stage ``k`` keeps.
    """

    time: Sequence[float]
    out: Sequence[float]
    link: Sequence[float]
    static: Sequence[float]
    act: Sequence[float]
    work: Sequence[float]
    in_flight: Sequence[float]
    mem_cap: float = math.inf


class _Costs:
    """Stage cost and memory in O(1) from prefix sums."""

    def __init__(self, s: StageInputs) -> None:
        self.s = s
        self.t = [0.0, *accumulate(s.time)]
        self.st = [0.0, *accumulate(s.static)]
        self.ac = [0.0, *accumulate(s.act)]

    def time(self, k: int, i: int, j: int, n_stages: int) -> float:
        """Stage ``k`` holding layers ``[i, j)``."""
        c = self.t[j] - self.t[i]
        if k > 0:
            c += 2 * self.s.out[i - 1] * self.s.link[k - 1]
        if k < n_stages - 1:
            c += 2 * self.s.out[j - 1] * self.s.link[k]
        return c

    def fits(self, k: int, i: int, j: int) -> bool:
        if math.isinf(self.s.mem_cap):
            return True
        mem = self.st[j] - self.st[i] + self.s.in_flight[k] * (self.ac[j] - self.ac[i])
        return mem + max(self.s.work[i:j]) <= self.s.mem_cap


def stage_times(s: StageInputs, sizes: Sequence[int]) -> list[float]:
    """Each stage's time per microbatch under the split ``sizes``."""
    c, out, i = _Costs(s), [], 0
    for k, n in enumerate(sizes):
        out.append(c.time(k, i, i + n, len(sizes)))
        i += n
    return out


def stages_fit(s: StageInputs, sizes: Sequence[int]) -> bool:
    c, i = _Costs(s), 0
    for k, n in enumerate(sizes):
        if not c.fits(k, i, i + n):
            return False
        i += n
    return True


def _greedy(c: _Costs, n: int, k: int, cap: float) -> tuple[int, ...] | None:
    """Fill stages left to right with as many layers as keep each under ``cap``.

    A stage's time and memory grow with its layers, so the largest end that fits is
    found by bisection: O(k log n) per call.
    """
    sizes: list[int] = []
    i = 0
    for stage in range(k):
        if stage == k - 1:
            j = n
        else:
            lo, hi = i, n - (k - stage - 1)  # leave one layer for each later stage
            while lo < hi:  # the largest j in (i, hi] that fits; i if none
                mid = (lo + hi + 1) // 2
                if c.time(stage, i, mid, k) <= cap and c.fits(stage, i, mid):
                    lo = mid
                else:
                    hi = mid - 1
            j = lo
        if j <= i or c.time(stage, i, j, k) > cap or not c.fits(stage, i, j):
            return None
        sizes.append(j - i)
        i = j
    return tuple(sizes)


def balanced_split(s: StageInputs, k: int, rel_tol: float = 1e-3) -> tuple[int, ...] | None:
    """The split of ``len(s.time)`` layers into ``k`` stages with the smallest slowest
    stage (to ``rel_tol``) that fits in memory, or ``None`` when no split fits."""
    n = len(s.time)
    if k < 1 or n < k:
        raise ValueError(f"cannot split {n} layers into {k} non-empty stages")
    c = _Costs(s)
    best = even_split(n, k)  # a first guess; any split that fits bounds the search
    if not stages_fit(s, best):
        hi = c.t[n] + 2 * sum(max(s.out) * x for x in s.link) + 1e-12
        first = _greedy(c, n, k, hi)
        if first is None:
            return None
        best = first
    hi = max(stage_times(s, best))
    lo = max(max(s.time), c.t[n] / k)
    while hi - lo > rel_tol * hi:
        mid = (lo + hi) / 2
        got = _greedy(c, n, k, mid)
        if got is None:
            lo = mid
        else:
            best, hi = got, max(stage_times(s, got))
    return best
