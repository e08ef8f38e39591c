"""Arrangement functions: when each flow of a training step should ideally finish.

EchelonFlow's observation is that a training job consumes its flows at times fixed by
its computation pattern, so the right target is not "all together" (Coflow) but each
flow's ideal finish time ``d_j = d_1 + offset_j``. These functions give the offsets for
the four patterns the paper covers; the pattern builders attach them to flows.

- **Coflow** (a single collective): every offset 0.
- **Pipeline parallelism** (the paper's case study): the receiving stage consumes one
  microbatch every ``T`` (its forward time), so ``d_j = d_{j-1} + T``.
- **Data parallelism**: gradients are all-reduced bucket by bucket, and the next
  forward pass consumes layer ``l``'s parameters after the forward of layers ``< l``;
  bucket ``l``'s ideal finish is ``sum(forward[:l])`` (parameter server pulls alike).
- **Tensor parallelism**: collectives sit between computations on the critical path;
  collective ``j``'s ideal finish is the computation between it and collective 1.
- **FSDP**: layer ``l``'s all-gather is consumed when the forward reaches ``l``, its
  backward all-gather when the backward reaches it, and every reduce-scatter at the
  optimizer step, at the end of the backward pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def _times(name: str, xs: Sequence[float]) -> list[float]:
    out = [float(x) for x in xs]
    if any(not x >= 0 for x in out):
        raise ValueError(f"{name}: computation times must be >= 0, got {list(xs)}")
    return out


def coflow(n: int) -> list[float]:
    """``n`` flows that should finish together."""
    if n < 0:
        raise ValueError(f"n: must be >= 0, got {n}")
    return [0.0] * n


def pipeline(n: int, period: float | Sequence[float]) -> list[float]:
    """``d_j = d_{j-1} + T_j``: microbatch ``j`` is consumed ``T`` after ``j - 1``.

    ``period`` is one forward time for all, or one per gap (``n - 1`` values).
    """
    if n < 0:
        raise ValueError(f"n: must be >= 0, got {n}")
    gaps = [float(period)] * max(n - 1, 0) if isinstance(period, int | float) else period
    gaps = _times("period", gaps)
    if len(gaps) != max(n - 1, 0):
        raise ValueError(f"period: need {max(n - 1, 0)} gaps for {n} flows, got {len(gaps)}")
    return [0.0, *itertools.accumulate(gaps)][:n]


def data_parallel(forward: Sequence[float]) -> list[float]:
    """Per layer (bucket), the next forward pass's time before it reaches that layer."""
    fwd = _times("forward", forward)
    return [0.0, *itertools.accumulate(fwd)][: len(fwd)]


def tensor_parallel(between: Sequence[float]) -> list[float]:
    """Per collective of a step, the computation since the first collective;
    ``between[j]`` is the computation between collective ``j`` and ``j + 1``."""
    gaps = _times("between", between)
    return [0.0, *itertools.accumulate(gaps)]


def fsdp(
    forward: Sequence[float], backward: Sequence[float]
) -> tuple[list[float], list[float], list[float]]:
    """(forward all-gathers, backward all-gathers, reduce-scatters) per layer.

    The backward pass runs the layers last to first, so layer ``l``'s backward
    all-gather is consumed after the whole forward and the backward of layers ``> l``.
    """
    fwd, bwd = _times("forward", forward), _times("backward", backward)
    if len(fwd) != len(bwd):
        raise ValueError(f"backward: {len(bwd)} layers, forward has {len(fwd)}")
    ag_fwd = data_parallel(fwd)
    total_f, total_b = sum(fwd), sum(bwd)
    ag_bwd = [total_f + sum(bwd[i + 1 :]) for i in range(len(bwd))]
    rs = [total_f + total_b] * len(bwd)
    return ag_fwd, ag_bwd, rs
