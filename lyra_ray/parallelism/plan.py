"""The planner's vocabulary: what it may search (:class:`PlanOptions`) and what it
answers (:class:`Plan`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lyra_ray.parallelism.cost import Constants
from lyra_ray.parallelism.schedule import SCHEDULES, Schedule

Recompute = Literal["auto", "always", "never"]
Partition = Literal["balanced", "even"]


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """The search space and how many answers to keep.

    ``tp`` / ``pp`` / ``microbatches`` restrict the degrees tried (``None``: all that
    divide). ``distinct_shapes`` keeps only the best plan of each ``(t, p, d)``, so the
    ranking compares shapes rather than near-copies of the winner. ``prune`` skips whole
    shapes whose lower bound cannot beat the plans already kept; it returns the same
    ranking as the exhaustive search (``benchmarks/planner_speed.py`` checks it).
    """

    top_k: int = 5
    recompute: Recompute = "auto"
    schedules: tuple[Schedule, ...] = SCHEDULES
    chunks: tuple[int, ...] = (2, 4)
    max_microbatch: int = 16
    partition: Partition = "balanced"
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    microbatches: tuple[int, ...] | None = None
    distinct_shapes: bool = True
    prune: bool = True
    constants: Constants | None = None
    """The cost model's numbers; ``None``: those fitted for the GPU type planned for
    (:func:`lyra_ray.parallelism.cost.constants_for`: H200's measured fit, the defaults
    elsewhere). Given, they replace the fit: start from ``constants_for(gpu)`` with
    ``dataclasses.replace`` to change one number."""

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.recompute not in ("auto", "always", "never"):
            raise ValueError(f"recompute must be auto, always or never, got {self.recompute!r}")
        if self.partition not in ("balanced", "even"):
            raise ValueError(f"partition must be balanced or even, got {self.partition!r}")
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad or not self.schedules:
            raise ValueError(f"schedules must be some of {list(SCHEDULES)}, got {self.schedules}")
        if self.max_microbatch < 1 or any(v < 2 for v in self.chunks):
            raise ValueError("max_microbatch must be >= 1 and every chunk count >= 2")


@dataclass(frozen=True, slots=True)
class Plan:
    """One way to run a training iteration, and what the cost model predicts for it.

    ``stages`` lists the layers on each pipeline stage (each *virtual* stage, in order,
    for the interleaved schedule: device ``k`` holds stages ``k, k + p, ...``).
    ``tflops_per_gpu`` counts the FLOPs actually executed, recomputation included, as
    the PTD-P paper reports them.
    """

    gpu: str
    n_gpus: int
    global_batch: int
    t: int
    p: int
    d: int
    microbatch: int
    num_microbatches: int
    schedule: Schedule
    chunks: int
    recompute: bool
    stages: tuple[int, ...]
    iteration_s: float
    pipeline_s: float
    dp_s: float
    optimizer_s: float
    memory_bytes: float
    bubble: float
    tflops_per_gpu: float

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.iteration_s

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.t, self.p, self.d)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``lyra plan --json`` writes and a training run receives."""
        return {
            "gpu": self.gpu,
            "n_gpus": self.n_gpus,
            "global_batch": self.global_batch,
            "t": self.t,
            "p": self.p,
            "d": self.d,
            "microbatch": self.microbatch,
            "num_microbatches": self.num_microbatches,
            "schedule": self.schedule,
            "chunks": self.chunks,
            "recompute": self.recompute,
            "stages": list(self.stages),
            "iteration_s": self.iteration_s,
            "memory_gb_per_gpu": self.memory_bytes / 2**30,  # GiB: an "80 GB" A100 has 80
            "bubble": self.bubble,
            "tflops_per_gpu": self.tflops_per_gpu,
            "samples_per_s": self.samples_per_s,
        }
