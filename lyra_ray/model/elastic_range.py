"""What an elastic job is, from its profile: the worker counts it may run at.

A data-parallel job keeps its global batch whatever its size; its size changes only how
the batch is split and how fast a step goes. Two facts of its profile bound the size:

* **Minimum: the fewest workers that hold the batch.** A worker holds at most the
  largest local batch the profile measured (Pollux's ``max_local_bsz``: past it the
  step needs gradient accumulation, which the profile did not measure as a worker's
  natural step). So the minimum is ``ceil(batch / max_local_bsz)``. A job that asks
  for fewer workers already accepts accumulation at its size: its request is then its
  minimum (never more GPUs than it asked for just to start).
* **Maximum: where one more worker stops paying.** On each GPU type's curve
  (steps/s against workers), the maximum is the count past which added workers bring
  less than ``fraction`` of a worker's goodput each: walking up from the minimum, a
  count ``n`` becomes the maximum when its goodput beats the maximum so far, ``b``, by
  at least ``fraction * w * (n - b)``, with ``w`` the best goodput per worker the job
  showed at ``n`` or fewer. Comparing with the best size so far rather than with
  ``n - 1`` matters: measured curves are not concave (a fifth worker on a second node
  can be slower than four on one, and past some size the curve is a sawtooth of node
  boundaries), so neither a dip ends the range nor a tooth of the saw extends it.
  The job's maximum is the largest over its types, at least what it asked for, and
  never past the largest count its curves can run.

With a fixed batch, statistical efficiency does not change with the size, so goodput is
proportional to steps/s and the curves decide alone.

:func:`doubling_range` is the rule this project used before (``max(1, g // 2)`` to
``2 g`` around a request of ``g``), kept for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

DEFAULT_FRACTION = 0.5
"""A worker that adds less than half a worker's share of goodput is not worth its GPU
on a shared cluster (docs/lyra.md, "What an elastic job is")."""

Curve = Mapping[int, float]
"""Steps/s by worker count (counts the job cannot run at are absent or 0)."""


def min_workers(batch: int, max_local_batch: int, requested: int | None = None) -> int:
    """The fewest workers that hold ``batch`` at ``max_local_batch`` each (at most the
    request, if one is given)."""
    if batch < 1 or max_local_batch < 1:
        raise ValueError(f"batch ({batch}) and max_local_batch ({max_local_batch}) must be >= 1")
    lo = max(1, math.ceil(batch / max_local_batch - 1e-9))
    return lo if requested is None else max(1, min(lo, requested))


def max_on_curve(curve: Curve, lo: int, fraction: float = DEFAULT_FRACTION) -> int:
    """The count past which no further worker adds ``fraction`` of a worker's goodput."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    top = max((n for n, r in curve.items() if r > 0), default=0)
    if top < lo:
        return lo
    best, per_worker = lo, 0.0
    for n in range(1, top + 1):
        rate = curve.get(n, 0.0)
        per_worker = max(per_worker, rate / n)
        if n > best and rate - curve.get(best, 0.0) >= fraction * per_worker * (n - best):
            best = n
    return best


def profile_range(
    curves: Mapping[str, Curve],
    batch: int,
    max_local_batch: int,
    requested: int | None = None,
    fraction: float = DEFAULT_FRACTION,
) -> tuple[int, int]:
    """``(min, max)`` workers of a job from its curves on each GPU type (module doc)."""
    lo = min_workers(batch, max_local_batch, requested)
    runnable = max((n for c in curves.values() for n, r in c.items() if r > 0), default=lo)
    hi = max((max_on_curve(c, lo, fraction) for c in curves.values()), default=lo)
    if requested is not None:
        hi = max(hi, requested)
    hi = min(hi, max(runnable, lo))
    return lo, max(lo, hi)


def doubling_range(requested: int) -> tuple[int, int]:
    """The former rule: ``max(1, g // 2)`` to ``2 g`` around a request of ``g``."""
    return max(1, requested // 2), 2 * requested
