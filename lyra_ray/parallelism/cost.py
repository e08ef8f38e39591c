"""How long one layer takes on one GPU: the analytic model, or measured times.

The analytic model charges a layer, per microbatch of ``b`` samples on a tensor-parallel
group of ``t`` GPUs:

* matrix multiplies: ``b * flops / t`` at ``peak * e(w / t)``, where
  ``e(x) = gemm_max * x / (x + gemm_half_width)``: a GEMM whose narrow side ``w / t``
  shrinks runs further from peak (the reason tensor parallelism stops paying off long
  before its communication does);
* memory-bound kernels: their bytes over ``hbm_efficiency`` times the HBM bandwidth, the
  split part divided by ``t``, the replicated part (layer norm, dropout-add) not;
* tensor-parallel all-reduces: a ring over ``t`` GPUs, ``2 (t - 1)/t * bytes / bw``, on
  NVLink when the group fits in a server and on the network when it does not; nothing
  overlaps them (Megatron-LM 2021 does not);
* a fixed cost per pass for kernel launches, which is what makes tiny microbatches slow;
* for GPU types measured under an eager framework (:data:`FITTED`), a floor: the host
  time the framework spends dispatching the layer's kernels (``host_floor_s``). The GPU
  cannot finish before the host has issued the work, and the host runs ahead of the GPU
  when the GPU is the slower side, so the layer takes the smooth maximum
  ``(floor^k + device^k)^(1/k)`` (``k = host_overlap``) of the two, not their sum.

Recomputation repeats the forward pass (compute, traffic, all-reduces and its third of
the host dispatch) inside the backward pass of checkpointed layers.
:class:`ProfiledTimes` replaces all of this with per-layer times measured at each
microbatch size (tensor parallelism then unsupported).

Which numbers: :func:`constants_for` gives a GPU type's fitted :class:`Constants` if it
has some (:data:`FITTED`: H200) and the defaults otherwise, which are the constants the
PTD-P A100 table is reproduced with (no floor, full bandwidth, 20 µs launches).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lyra_ray.parallelism.hardware import GpuSpec
from lyra_ray.parallelism.layers import LayerCost, ModelSpec


@dataclass(frozen=True, slots=True)
class Constants:
    """The cost model's few free numbers (see docs/planner.md for where they come from).

    The defaults are the A100-era model the PTD-P table is checked with; a GPU type with
    measurements gets its own instance in :data:`FITTED`.
    """

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
    hbm_efficiency: float = 1.0
    """Fraction of the spec-sheet HBM bandwidth that memory-bound kernels reach. 1.0
    (the spec sheet) in the default model, which the PTD-P table was reproduced with."""
    host_floor_s: float = 0.0
    """Host-side dispatch time of one layer's forward and backward pass in an eager
    framework (Python, the dispatcher, autograd, kernel launches): the least a layer can
    take however small its work. 0: no floor (the default model)."""
    host_overlap: float = 1.0
    """Exponent ``k`` of the smooth maximum ``(floor^k + device^k)^(1/k)`` that combines
    the host floor with the device time: large ``k`` is a hard ``max`` (host and GPU
    fully overlap), 1 their sum. Unused without a floor."""

    def __post_init__(self) -> None:
        for f in ("gemm_max", "hbm_efficiency", "host_overlap"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{f} must be a finite number > 0, got {v!r}")
        if self.gemm_max > 1 or self.hbm_efficiency > 1:
            raise ValueError("gemm_max and hbm_efficiency are fractions of peak: <= 1")
        if self.host_overlap < 1:
            raise ValueError(f"host_overlap must be >= 1, got {self.host_overlap!r}")
        for f in ("gemm_half_width", "layer_overhead_s", "host_floor_s"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{f} must be a finite number >= 0, got {v!r}")


DEFAULT = Constants()
"""The default constants (every GPU type without a fit)."""

H200_SOURCE = (
    "shared/data/gpu/h200.json, key gpt_layer_fwd_bwd (16 rows; copied with their "
    "provenance to tests/data/h200_gpt_layer.json): one NVIDIA H200 (141 GB HBM3e), "
    "16 host cores, PyTorch 2.11.0+cu130 (CUDA 13), measured 2026-11-26 - the same "
    "measurement as the throughput catalogue's h200 (lyra_ray/model/data/h200_throughputs.json)"
)
"""Where :data:`FITTED`'s ``h200`` entry comes from."""

FITTED: dict[str, Constants] = {
    "h200": Constants(
        # Fitted by `.venv/bin/python benchmarks/planner_fit.py` (least squares on the log
        # of predicted / measured over the 16 rows of H200_SOURCE; results, ratios and a
        # leave-one-hidden-out check in benchmarks/results/planner_fit.json):
        gemm_max=0.723,  # of 989 TFLOP/s, GEMMs and flash attention alike
        host_floor_s=2.24e-3,  # eager PyTorch, 16-core host: depends on the host CPU
        host_overlap=11.9,
        # Not fitted to those rows:
        hbm_efficiency=0.72,  # measured: a Mixtral expert's weights streamed (same file)
        gemm_half_width=100.0,  # the default curve's shape (the rows cannot see w < 1024)
        layer_overhead_s=0.0,  # launches are host work: inside host_floor_s
    ),
}
"""Constants fitted per GPU type to measured layer times; every other type uses the
defaults. At most six differ from the defaults per type (a model, not a table of
shapes); ``tests/unit/test_planner_h200.py`` holds every measured row to 15 %.

``h200`` (source: :data:`H200_SOURCE`): one GPT layer (LayerNorm, QKV, causal flash
attention, projection, 4h GELU MLP; bf16; sequence 2048, head dimension 128) forward and
backward in eager PyTorch, hidden 1024-8192 x microbatch 1-8. Three constants are fitted
to those rows: the GEMM efficiency (large layers run at ~650 TFLOP/s), the host floor
(every layer takes >= ~2 ms: host dispatch, a hundred times the default launch cost; it
depends on the host CPU and the framework, measured with a 16-core host, PyTorch 2.11,
CUDA 13) and the overlap exponent. The bandwidth efficiency comes from the same file's
``moe_expert_forward`` (a 4096x14336 SwiGLU expert at 1-16 tokens streams its 352 MB of
weights in ~102 µs: 72 % of 4.8 TB/s); with it the eager element-wise traffic explains
why hidden 1024 runs at 524 TFLOP/s where 8192 reaches 650, and a width term fitted
alongside goes to 0, so the default width curve (``gemm_half_width``) is kept for what
the rows cannot show: tensor-parallel shards narrower than 1024.
"""


def constants_for(gpu: GpuSpec | str) -> Constants:
    """The constants fitted for ``gpu`` (:data:`FITTED`), or the defaults."""
    name = gpu if isinstance(gpu, str) else gpu.name
    return FITTED.get(name.lower(), DEFAULT)


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
    layer: LayerCost,
    gpu: GpuSpec,
    t: int,
    b: int,
    recompute: bool,
    constants: Constants | None = None,
) -> float:
    """Forward + backward seconds of ``layer`` for a microbatch of ``b`` on ``t`` GPUs.

    ``constants``: the model's numbers; ``None`` takes those fitted for ``gpu``
    (:func:`constants_for`). The host floor applies to layers that compute (a
    transformer block, the output head), not to an embedding lookup (no FLOPs), which
    dispatches a handful of kernels.
    """
    c = constants if constants is not None else constants_for(gpu)
    redo = recompute and layer.checkpointed
    passes_fwd = 2 if redo else 1
    flops = layer.bwd_flops + layer.fwd_flops * passes_fwd
    compute = b * flops / t / (gpu.peak_flops * gemm_efficiency(layer.gemm_width, t, c))
    traffic = b * (layer.mem_bytes / t + layer.mem_bytes_replicated) * (2 + passes_fwd)
    memory = traffic / (gpu.hbm_bw * c.hbm_efficiency)
    tp = 0.0
    if t > 1 and layer.tp_comm_bytes:
        one_pass = allreduce_s(b * layer.tp_comm_bytes, t, gpu.group_bw(t), c, count=2)
        tp = one_pass * (1 + passes_fwd)
    overhead = c.layer_overhead_s * (1 + passes_fwd)
    device = compute + memory + tp + overhead
    if c.host_floor_s <= 0 or layer.fwd_flops <= 0:
        return device  # no floor: the default model, or a layer that computes nothing
    # The backward pass dispatches about twice the forward's kernels (autograd runs two
    # GEMMs per forward GEMM), so a recomputed forward adds a third of the floor.
    floor = c.host_floor_s * (2 + passes_fwd) / 3
    top, k = max(floor, device), c.host_overlap
    return top * float(((floor / top) ** k + (device / top) ** k) ** (1 / k))


class AnalyticTimes:
    """Per-layer times from FLOPs, bytes and the GPU's speeds, cached per (t, b, recompute).

    ``c``: the model's numbers; ``None`` takes those fitted for ``gpu``.
    """

    def __init__(self, model: ModelSpec, gpu: GpuSpec, c: Constants | None = None) -> None:
        self.model, self.gpu = model, gpu
        self.c = c if c is not None else constants_for(gpu)
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
