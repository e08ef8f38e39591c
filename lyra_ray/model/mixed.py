"""Throughput of a data-parallel job whose workers sit on more than one GPU type.

Lyra lends inference servers to training; when their GPUs are not the training type
(T4s beside V100s), an elastic job may keep its base on its own type and put flexible
workers on the loaned servers. How fast such a job trains is a modelling choice, so it
is made here once, for the policy and the simulator alike, and documented in
``docs/lyra.md``.

**The model: per-worker batches in proportion to speed, the global batch kept.** A job
of ``n`` workers keeps its global batch and its hyper-parameters; each worker takes a
share of the batch in proportion to its speed (:func:`batch_shares`), so all workers
finish their compute together and no fast GPU waits on a slow one. Its rate is then the
sum of its workers' speeds times the job's scaling efficiency at ``n`` workers *over two
servers*::

    steps/s = sum(workers_t * speed_t) * spread(n) / n

``speed_t`` is one worker's steps/s on type ``t``; ``spread(n)`` is the job's measured
speedup of ``n`` workers split over two servers
(:func:`lyra_ray.model.scaling.spread_speedup`), because the flexible workers sit on a
loaned server and a mixed job always crosses the network, even where a consolidated job
of its size would fit on one server. With one GPU type and one server this is the
model every other run uses (the curve's speedup times one worker's rate); with linear
scaling it is the plain sum of speeds. It treats communication as a fixed share of a
step, as the single-type model does for every GPU type.

This is conservative, and on the measured curves it often says *do not mix*: two
workers over two servers speed bert up only 1.01x (ncf 0.62x, imagenet 1.70x), so one
V100 plus one T4 (0.4x) trains bert at 0.70x of the V100 alone; the policy asks this
model and adds a flexible worker on another type only where it pays.

The alternative, an equal batch per worker with the step bounded by the slowest worker,
makes one T4 drag every V100 down to its speed (0.4x), so mixing would never pay; it
describes a trainer that does not know its workers differ, not the one we run.
What it leaves out: a slow worker's memory may not hold its share (shares here are at
most the fastest worker's), and the learning dynamics are unchanged only if the loop
weights each worker's gradient by its share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lyra_ray.model import scaling
from lyra_ray.model.types import GpuType, JobSpec, ThroughputModel

Parts = Sequence[tuple[GpuType, int]]


def can_mix(spec: JobSpec) -> bool:
    """Whether a job may run on several GPU types: plain data parallelism only. A job
    planned with tensor or pipeline parallelism (``throughput_by_size``) may not."""
    return spec.throughput_by_size is None and spec.max_workers > spec.min_workers


def mixed_throughput(model: ThroughputModel, spec: JobSpec, parts: Parts) -> float:
    """Steps/s of ``spec`` on ``parts`` (``(gpu_type, workers)``, the base's type first)."""
    live = [(g, w) for g, w in parts if w > 0]
    if not live:
        return 0.0
    base, n = live[0][0], sum(w for _, w in live)
    if len(live) == 1:
        return model.throughput(spec, base, n)
    if spec.throughput_by_size is not None:
        return 0.0
    speed = {g: model.throughput(spec, g, 1) for g, _ in live}
    if min(speed.values()) <= 0:
        return 0.0
    # The model's own n-worker efficiency on the base type (a catalogue job's measured
    # one, else its curve's), moved from one server to two by the curve's spread ratio.
    same = model.throughput(spec, base, n) / (n * speed[base])
    curve = scaling.speedup(spec.scaling, n)
    ratio = scaling.spread_speedup(spec.scaling, n) / curve if curve > 0 else 1.0
    return sum(w * speed[g] for g, w in live) * same * ratio


def batch_shares(speeds: Mapping[GpuType, float], parts: Parts) -> dict[GpuType, float]:
    """The share of the global batch one worker of each type takes: in proportion to
    its speed, so all workers finish a step together; the shares sum to 1."""
    total = sum(w * speeds[g] for g, w in parts if w > 0)
    if total <= 0:
        raise ValueError("no worker with a positive speed")
    return {g: speeds[g] / total for g, w in parts if w > 0}


BATCH_SHARES_KEY = "lyra_batch_shares"
"""Run-config key of a mixed-type run: GPU-type label -> one worker's share of the
global batch (:func:`label_shares`); read by ``StepLoop.batch_share``."""


def label_shares(
    speeds: Mapping[GpuType, float], parts: Parts, label: Callable[[GpuType], str]
) -> dict[str, float] | None:
    """:func:`batch_shares` keyed by each type's node label (what a worker can read of
    itself), or None when a speed is unknown (the run then splits its batch evenly)."""
    try:
        shares = batch_shares(speeds, parts)
    except (KeyError, ValueError):
        return None
    return {label(g): s for g, s in shares.items()}


def with_batch_shares(
    config: Mapping[str, Any],
    speeds: Mapping[GpuType, float],
    parts: Parts,
    label: Callable[[GpuType], str],
) -> dict[str, Any]:
    """A mixed-type run's config: ``config`` plus each GPU type's share of the global
    batch under :data:`BATCH_SHARES_KEY` (unchanged when a speed is unknown)."""
    out = dict(config)
    shares = label_shares(speeds, parts, label)
    if shares is not None:
        out[BATCH_SHARES_KEY] = shares
    return out


def worker_share(shares: Mapping[str, float] | None, label: str | None, world: int) -> float:
    """One worker's share of the global batch: its type's in ``shares``, else 1/world."""
    even = 1.0 / max(world, 1)
    if not shares or label is None:
        return even
    value = shares.get(label)
    return float(value) if isinstance(value, int | float) and 0 < value <= 1 else even
