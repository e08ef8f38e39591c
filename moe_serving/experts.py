"""The expert FFN in numpy, for Serve replicas.

WHY numpy and not torch: every expert replica is its own Ray actor process; importing torch
in each costs ~200 MB of RAM and seconds of start-up, which on a small host caps how many
replicas a benchmark can run. The math is the same as ``model.Expert`` (Linear, SiLU, Linear),
and the served-vs-in-process test checks they agree to 1e-5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ExpertWeights:
    """Weights of one expert FFN: y = silu(x @ w1.T + b1) @ w2.T + b2."""

    w1: F32  # [hidden, dim]
    b1: F32  # [hidden]
    w2: F32  # [dim, hidden]
    b2: F32  # [dim]


def expert_ffn(x: F32, w: ExpertWeights) -> F32:
    """Apply one expert to a batch of token vectors ``x`` of shape [n, dim]."""
    h = x @ w.w1.T + w.b1
    h = 0.5 * h * (1.0 + np.tanh(0.5 * h))  # SiLU, written via tanh so it never overflows
    out: F32 = (h @ w.w2.T + w.b2).astype(np.float32, copy=False)
    return out


@dataclass(frozen=True)
class ExpertSlice:
    """One expert's slice of a layer's fused 3-D expert tensors (``transformers``' layout,
    e.g. ``MixtralExperts``): ``gate_up`` is ``gate_up_proj[e]`` [2*inter, dim] (the gate's
    rows, then the up projection's), ``down`` is ``down_proj[e]`` [dim, inter]. This slice is
    the unit Lina replicates and places."""

    gate_up: F32
    down: F32


def swiglu(x: F32, w: ExpertSlice) -> F32:
    """``down(silu(x gate^T) * (x up^T))`` for token vectors ``x`` [n, dim]: what the
    fused experts module computes for one expert, before the router's weight."""
    gu = x @ w.gate_up.T
    inter = gu.shape[1] // 2
    g, u = gu[:, :inter], gu[:, inter:]
    h = g / (1.0 + np.exp(-np.clip(g, -60.0, 60.0))) * u  # SiLU, clipped so exp never overflows
    out: F32 = (h @ w.down.T).astype(np.float32, copy=False)
    return out
