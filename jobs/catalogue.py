"""The workload catalogue: job type -> steps/s per worker on each GPU type.

These are the project's own round numbers for a handful of common training jobs,
shaped like published measurements (V100 ≈ 1.5–3x P100 ≈ 2–6x K80 depending on the
model; T4 inference cards train at roughly K80–P100 speed). They seed the scheduler
before it has measured anything and make the demo and tests independent of
``../shared/data``; Gavel's measured table is loaded instead with ``--throughputs``.
"""

from __future__ import annotations

CATALOGUE: dict[str, dict[str, float]] = {
    "resnet50": {"a100": 7.0, "v100": 4.0, "p100": 2.2, "t4": 1.6, "k80": 0.8},
    "resnet18": {"a100": 22.0, "v100": 14.0, "p100": 9.0, "t4": 6.5, "k80": 4.0},
    "transformer": {"a100": 9.0, "v100": 5.5, "p100": 2.5, "t4": 2.0, "k80": 1.0},
    "lm": {"a100": 30.0, "v100": 18.0, "p100": 9.5, "t4": 7.0, "k80": 4.5},
    "recommendation": {"a100": 25.0, "v100": 15.0, "p100": 11.0, "t4": 9.0, "k80": 7.5},
    "a3c": {"a100": 3.0, "v100": 2.0, "p100": 1.9, "t4": 1.6, "k80": 1.5},
    "cyclegan": {"a100": 10.0, "v100": 6.0, "p100": 2.8, "t4": 2.2, "k80": 1.2},
    "bert": {"a100": 5.0, "v100": 2.8, "p100": 1.3, "t4": 1.1, "k80": 0.45},
}
"""steps/s of one worker. Keys are lower-case GPU types as the cluster names them."""

KEEP_WHEN_SHARED: dict[str, float] = {
    "resnet50": 0.55,
    "resnet18": 0.6,
    "transformer": 0.6,
    "lm": 0.7,
    "recommendation": 0.75,
    "a3c": 0.8,
    "cyclegan": 0.55,
    "bert": 0.5,
}
"""The share of its alone speed a job keeps while it shares its GPUs with another
(space sharing, Gavel's "packed" policies): round numbers in the range Gavel measured
(compute-bound image models keep about half, small or input-bound models more). A seed
only: the live scheduler replaces each side with what it measures beside that partner
(:class:`lyra_ray.model.throughput.MeasuredThroughputs`)."""


def pair_rates(a: str, b: str, gpu: str) -> tuple[float, float]:
    """Steps/s of ``a`` and ``b`` (one worker each) sharing one ``gpu``."""
    return (
        CATALOGUE[a].get(gpu, 0.0) * KEEP_WHEN_SHARED[a],
        CATALOGUE[b].get(gpu, 0.0) * KEEP_WHEN_SHARED[b],
    )
