"""One MoE expert's device time: a roofline with a floor, fitted to a measured H200.

WHY a model and not a table: the planner and the benchmarks need the time of any expert
shape at any token count (DeepSeek-V3's 7168x2048 expert was never measured), so the
shape enters only through physics: the bytes of weights the GPU must read, the FLOPs it
must do, and the bytes of intermediate activations the eager SwiGLU writes and reads back.
Per GPU type there are four fitted constants and no per-shape table.

The expert is one SwiGLU FFN, ``(silu(x W1) * x W3) W2`` in bf16, with ``x`` of shape
``[tokens, dim]`` and ``W1, W3: [dim, hidden]``, ``W2: [hidden, dim]``:

- weight read ``t_w = 3 * dim * hidden * 2 B / bandwidth``: every call reads all three
  matrices once, whatever the token count (this is the flat region of a large expert);
- GEMM compute ``t_c = 6 * dim * hidden * tokens / flops`` (three matmuls, 2 FLOPs per MAC);
- weight streaming and compute overlap inside the GEMMs, so they combine as a smooth max
  ``(t_w^p + t_c^p)^(1/p)`` (``p = overlap``; p -> inf is the hard roofline max);
- activation passes ``t_a = 16 * hidden * tokens B / bandwidth``: eager SwiGLU makes 8 bf16
  passes over ``[tokens, hidden]`` tensors (the two GEMMs write h1 and h3; silu reads h1 and
  writes s; the product reads s and h3 and writes g; the last GEMM reads g), in kernels of
  their own, so they add serially;
- a launch floor ``floor``: the five kernels' launch and framework overhead, which the GPU
  work overlaps (the flat region of a small expert).

``t = max(floor, (t_w^p + t_c^p)^(1/p) + t_a)``. An expert with no tokens is not called: 0 s.

Pure: numpy only, no Ray, no I/O at import.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

BF16_BYTES = 2
WEIGHT_MATRICES = 3
FLOPS_PER_TOKEN_PER_WEIGHT = 2  # one multiply-accumulate per weight per token
ACTIVATION_PASSES = 8  # bf16 passes over [tokens, hidden] in eager SwiGLU (module docstring)

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ExpertRoofline:
    """The four fitted constants of one GPU type (see the module docstring for the model)."""

    bandwidth: float
    """Achieved memory bandwidth, bytes/s (weight reads and activation passes)."""
    flops: float
    """Achieved bf16 GEMM throughput, FLOP/s."""
    floor_s: float
    """Launch floor of one expert call, seconds."""
    overlap: float
    """Exponent ``p`` of the smooth max of weight-read and GEMM time."""
    source: str
    """Where the constants come from."""


H200 = ExpertRoofline(
    bandwidth=3.49e12,
    flops=806e12,
    floor_s=66.4e-6,
    overlap=2.72,
    source=(
        "fitted (least squares on log time, benchmarks/moe_expert_fit.py) to all 26 points of "
        "moe_expert_forward in ../shared/data/gpu/h200.json (copied to "
        "tests/data/h200_moe_expert.json): one SwiGLU expert's bf16 forward for "
        "'mixtral-8x7b expert (4096x14336)' and 'small expert (1024x4096)', 1 to 16384 "
        "tokens, measured 2026-11-26 on an NVIDIA H200 (141 GB HBM3e) with torch 2.11 "
        "(CUDA 13). Worst point within 9.2 % of its measured time. For scale: the H200's "
        "peak HBM bandwidth is 4.8 TB/s and its dense bf16 peak ~989 TFLOP/s, so the fitted "
        "constants are 73 % and 81 % of peak."
    ),
)
"""NVIDIA H200 (SXM, 141 GB). Fitted 2026-11-26 data; see ``source``."""

GPUS: dict[str, ExpertRoofline] = {"h200": H200}
"""Known GPU types, by the name ``expert_time_s`` takes."""


def roofline(gpu: str) -> ExpertRoofline:
    """The constants of ``gpu``; ValueError naming it and the known types otherwise."""
    try:
        return GPUS[gpu]
    except KeyError:
        raise ValueError(
            f"expert time: unknown gpu {gpu!r}; known: {', '.join(sorted(GPUS))}"
        ) from None


def expert_times_s(
    dim: int,
    hidden: int,
    tokens: npt.ArrayLike,
    gpu: str = "h200",
    constants: ExpertRoofline | None = None,
) -> Floats:
    """``expert_time_s`` over an array of token counts (fractional counts allowed);
    ``constants`` (e.g. measured on the host that runs the experts) replace ``gpu``'s."""
    if dim < 1 or hidden < 1:
        raise ValueError(f"expert time: dim ({dim}) and hidden ({hidden}) must be >= 1")
    c = roofline(gpu) if constants is None else constants
    t = np.asarray(tokens, dtype=np.float64)
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError("expert time: tokens must be finite and >= 0")
    weights = float(dim) * float(hidden)
    t_w = WEIGHT_MATRICES * weights * BF16_BYTES / c.bandwidth
    t_c = WEIGHT_MATRICES * FLOPS_PER_TOKEN_PER_WEIGHT * weights * t / c.flops
    t_a = ACTIVATION_PASSES * BF16_BYTES * float(hidden) * t / c.bandwidth
    p = c.overlap
    busy = (t_w**p + t_c**p) ** (1.0 / p) + t_a
    out: Floats = np.where(t > 0, np.maximum(c.floor_s, busy), 0.0)
    return out


def expert_time_s(dim: int, hidden: int, tokens: float, gpu: str = "h200") -> float:
    """Seconds of one SwiGLU expert's bf16 forward over ``tokens`` tokens on ``gpu``.

    ``dim`` is the model width, ``hidden`` the expert's FFN width (Mixtral-8x7B: 4096,
    14336; DeepSeek-V3: 7168, 2048). 0 tokens: the expert is not called, 0 s. Fractional
    token counts (an expected load) are allowed. Unknown ``gpu``: ValueError.
    """
    return float(expert_times_s(dim, hidden, tokens, gpu))


def flat_until(dim: int, hidden: int, gpu: str = "h200") -> float:
    """Token count where the expert leaves its flat region (its time reaches 1.1x tokens=1)."""
    base = expert_time_s(dim, hidden, 1.0, gpu)
    lo, hi = 1.0, 1e7
    for _ in range(60):  # bisection on a monotone function
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if expert_time_s(dim, hidden, mid, gpu) < 1.1 * base else (lo, mid)
    return hi


POISSON_EXACT_BELOW = 64.0
"""Mean token counts below this get the exact Poisson expectation; above, E[t(K)] = t(mean)
to well under 1 % (t is near-linear there and K concentrates)."""


def expected_expert_times_s(
    dim: int,
    hidden: int,
    mean_tokens: npt.ArrayLike,
    gpu: str = "h200",
    constants: ExpertRoofline | None = None,
) -> Floats:
    """Expected time of an expert whose token count in a step is Poisson(``mean_tokens``).

    WHY: at decode, an expert expected to get 0.3 tokens is called in only 26 % of steps,
    and each call costs the whole floor; planning with ``expert_time_s(0.3)`` would charge
    it the floor every step. Many tokens, each picking this expert with a small probability,
    give a Poisson count.
    """
    lam = np.asarray(mean_tokens, dtype=np.float64)
    if np.any(lam < 0) or not np.all(np.isfinite(lam)):
        raise ValueError("expert time: mean tokens must be finite and >= 0")
    small = np.minimum(lam, POISSON_EXACT_BELOW)
    kmax = int(POISSON_EXACT_BELOW + 12.0 * POISSON_EXACT_BELOW**0.5 + 12.0)
    ks = np.arange(kmax + 1, dtype=np.float64)
    t_k = expert_times_s(dim, hidden, ks, gpu, constants)
    pmf = np.exp(-small)
    acc = pmf * t_k[0]
    for k in range(1, kmax + 1):
        pmf = pmf * small / k
        acc = acc + pmf * t_k[k]
    big = expert_times_s(dim, hidden, lam, gpu, constants)
    out: Floats = np.where(lam < POISSON_EXACT_BELOW, acc, big)
    return out


@dataclass(frozen=True)
class ExpertCost:
    """One expert shape on one GPU type, as a cost function of token counts (picklable, so
    it can travel to a Serve replica)."""

    dim: int
    hidden: int
    gpu: str = "h200"
    constants: ExpertRoofline | None = None
    """Constants that replace ``gpu``'s: a device whose expert time was measured where it
    runs (``host_roofline``), or a constant per call (``per_call``)."""

    def __post_init__(self) -> None:
        if self.constants is None:
            roofline(self.gpu)
        if self.dim < 1 or self.hidden < 1:
            raise ValueError(f"expert time: dim ({self.dim}) and hidden ({self.hidden}) >= 1")

    def __call__(self, tokens: npt.ArrayLike) -> Floats:
        """Seconds of one call per token count (0 tokens: not called, 0 s)."""
        return expert_times_s(self.dim, self.hidden, tokens, self.gpu, self.constants)

    def seconds(self, tokens: float) -> float:
        return float(self(tokens))

    def expected(self, mean_tokens: npt.ArrayLike) -> Floats:
        """Expected seconds per step at Poisson(``mean_tokens``) tokens."""
        return expected_expert_times_s(self.dim, self.hidden, mean_tokens, self.gpu, self.constants)


UNBOUNDED = 1e30
"""A bandwidth or FLOP rate so high that its term vanishes from the roofline."""


def per_call(seconds: float) -> ExpertRoofline:
    """Constants under which every call takes ``seconds``, whatever its tokens (a spec's
    ``service_ms``)."""
    if not (np.isfinite(seconds) and seconds > 0):
        raise ValueError(f"expert time: seconds per call must be > 0, got {seconds}")
    return ExpertRoofline(UNBOUNDED, UNBOUNDED, seconds, 2.0, "a constant per call")


def host_roofline(
    dim: int, hidden: int, one_token_s: float, many: int, many_s: float, source: str
) -> ExpertRoofline:
    """Constants from two timings of one expert where it runs: its time at one token (the
    floor: call and framework overhead) and at ``many`` tokens (the FLOP rate), in the
    roofline's own form ``max(floor, compute)``. WHY: a device that computes its experts
    on a CPU is neither an H200 nor flat; the planner must predict the time of the
    devices that actually run."""
    if not (one_token_s > 0 and many_s > 0 and many > 1):
        raise ValueError("expert time: host timings must be > 0 and many > 1")
    flops = WEIGHT_MATRICES * FLOPS_PER_TOKEN_PER_WEIGHT * dim * hidden * many / many_s
    return ExpertRoofline(UNBOUNDED, flops, one_token_s, 2.0, source)
