"""How long one layer takes on one GPU: the analytic model, or measured times.

The analytic model charges a layer, per microbatch of ``b`` samples on a tensor-parallel
group of ``t`` GPUs:

* matrix multiplies: ``b * flops / t`` at ``peak * e(w / t)``, where
  ``e(x) = gemm_max * x / (x + gemm_half_width)``: a GEMM whose narrow side ``w / t``
  shrinks runs further from peak (the reason tensor parallelism stops paying off long
  before its communication does);
* memory-bound kernels: their bytes over HBM bandwidth, the split part divided by ``t``,
  the replicated part (layer norm, dropout-add) not;
* tensor-parallel all-reduces: a ring over ``t`` GPUs, ``2 (t - 1)/t * bytes / bw``, on
  NVLink when the group fits in a server and on the network when it does not; nothing
  overlaps them (Megatron-LM 2021 does not);
* a fixed cost per pass for kernel launches, which is what makes tiny microbatches slow.

Recomputation repeats the forward pass (compute, traffic and all-reduces) inside the
backward pass of checkpointed layers. :class:`ProfiledTimes` replaces all of this with
per-layer times measured at each microbatch size (tensor parallelism then unsupported).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lyra_ray.parallelism.hardware import GpuSpec
from lyra_ray.parallelism.layers import LayerCost, ModelSpec


@dataclass(frozen=True, slots=True)
class Constants:
    """The cost model's few free numbers (see docs/planner.md for where they come from)."""

    gemm_max: float = 0.70
    """Fraction of peak that large half-precision GEMMs reach end to end."""
    gemm_half_width: float = 100.0
    """Per-GPU GEMM width at which GEMMs reach half of ``gemm_max``."""
    layer_overhead_s: float = 20e-6
    """Fixed cost of one layer's forward or backward pass (kernel launches)."""
    collective_latency_s: float = 15e-6
    """Start-up cost of one all-reduce or point-to-point transfer."""
    optimizer_bytes_per_param: float = 28.0
    """Adam step traffic per parameter: fp32 master, two moments and the fp16 weight
    and gradient, read and (but the gradient) written."""
    state_bytes_per_param_byte: float = 8.0
    """Training state per byte of fp16 weights: weights 2 + gradients 2 + fp32 master 4
    + Adam moments 8 = 16 bytes per parameter, 8 per weight byte."""


def allreduce_s(nbytes: float, n: int, bw: float, c: Constants, count: int = 1) -> float:
    """Ring all-reduce of ``nbytes`` in ``count`` calls among ``n`` GPUs at ``bw`` each."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bw + count * c.collective_latency_s


def gemm_efficiency(width: float | None, t: int, c: Constants) -> float:
    if width is None:
        return c.gemm_max
    x = width / t
    return c.gemm_max * x / (x + c.gemm_half_width)


def layer_time_s(
    layer: LayerCost, gpu: GpuSpec, t: int, b: int, recompute: bool, c: Constants
) -> float:
    """Forward + backward seconds of ``layer`` for a microbatch of ``b`` on ``t`` GPUs."""
    redo = recompute and layer.checkpointed
    passes_fwd = 2 if redo else 1
    flops = layer.bwd_flops + layer.fwd_flops * passes_fwd
    compute = b * flops / t / (gpu.peak_flops * gemm_efficiency(layer.gemm_width, t, c))
    traffic = b * (layer.mem_bytes / t + layer.mem_bytes_replicated) * (2 + passes_fwd)
    memory = traffic / gpu.hbm_bw
    tp = 0.0
    if t > 1 and layer.tp_comm_bytes:
        one_pass = allreduce_s(b * layer.tp_comm_bytes, t, gpu.group_bw(t), c, count=2)
        tp = one_pass * (1 + passes_fwd)
    overhead = c.layer_overhead_s * (1 + passes_fwd)
    return compute + memory + tp + overhead


class AnalyticTimes:
    """Per-layer times from FLOPs, bytes and the GPU's speeds, cached per (t, b, recompute)."""

    def __init__(self, model: ModelSpec, gpu: GpuSpec, c: Constants) -> None:
        self.model, self.gpu, self.c = model, gpu, c
        self._cache: dict[tuple[int, int, bool], list[float]] = {}

    def supports_tp(self, t: int) -> bool:
        return self.model.tp_ok(t)

    def times(self, t: int, b: int, recompute: bool) -> list[float]:
        key = (t, b, recompute)
        got = self._cache.get(key)
        if got is None:
            memo: dict[int, float] = {}
            got = []
            for layer in self.model.layers:
                # Identical layers (a transformer's blocks) share one computation.
                k = id(layer)
                if k not in memo:
                    memo[k] = layer_time_s(layer, self.gpu, t, b, recompute, self.c)
                got.append(memo[k])
            self._cache[key] = got
        return got

    def min_compute_s(self, t: int) -> float:
        """A lower bound on one sample's time summed over layers, on one GPU of ``t``."""
        best = 0.0
        for layer in self.model.layers:
            eff = gemm_efficiency(layer.gemm_width, t, self.c)
            best += (layer.fwd_flops + layer.bwd_flops) / t / (self.gpu.peak_flops * eff)
        return best


class ProfiledTimes:
    """Per-layer (forward, backward) seconds measured at each microbatch size.

    The planner's predictions for a real pipeline are fed from here: the compute comes
    from the profile, the transfers still from the link model.
    """

    def __init__(self, per_microbatch: Mapping[int, Sequence[tuple[float, float]]]) -> None:
        if not per_microbatch:
            raise ValueError("a profile needs at least one microbatch size")
        n = {len(v) for v in per_microbatch.values()}
        if len(n) != 1:
            raise ValueError("every microbatch size must profile the same layers")
        for b, rows in per_microbatch.items():
            for f, bw in rows:
                if not (math.isfinite(f) and math.isfinite(bw) and f >= 0 and bw >= 0):
                    raise ValueError(f"microbatch {b}: times must be finite and >= 0")
        self.per_microbatch = {int(b): list(v) for b, v in per_microbatch.items()}

    def supports_tp(self, t: int) -> bool:
        return t == 1

    def microbatch_sizes(self) -> list[int]:
        return sorted(self.per_microbatch)

    def times(self, t: int, b: int, recompute: bool) -> list[float]:
        rows = self.per_microbatch.get(b)
        if rows is None or t != 1:
            raise KeyError(f"no profile for microbatch {b} with tensor degree {t}")
        return [bw + f * (2 if recompute else 1) for f, bw in rows]

    def min_compute_s(self, t: int) -> float:
        return min(sum(self.times(1, b, False)) / b for b in self.per_microbatch)
