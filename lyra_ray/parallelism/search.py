"""The search: every ``(t, p, d)`` that multiplies to the GPU count, every microbatch
size, schedule and recomputation choice, ranked by predicted iteration time.

Pruning is branch and bound over shapes. A shape's iteration time is at least its
compute without recomputation, spread perfectly over all GPUs at the best GEMM
efficiency its tensor degree allows, plus the gradient all-reduce of an even share of
the weights; and it cannot fit if an even share of the training state alone exceeds a
GPU's memory. Shapes are visited in order of that bound, and the search stops once the
bound of the next shape is no better than the ``top_k``-th plan kept. The bound never
exceeds the true time, so the ranking equals the exhaustive search's.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterator

from lyra_ray.parallelism.cost import (
    AnalyticTimes,
    Constants,
    ProfiledTimes,
    allreduce_s,
    constants_for,
)
from lyra_ray.parallelism.evaluate import LayerTimes, evaluate
from lyra_ray.parallelism.hardware import GpuSpec
from lyra_ray.parallelism.layers import ModelSpec
from lyra_ray.parallelism.plan import Plan, PlanOptions
from lyra_ray.parallelism.schedule import Schedule

log = logging.getLogger(__name__)


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def shapes(
    model: ModelSpec, times: LayerTimes, n_gpus: int, global_batch: int, o: PlanOptions
) -> Iterator[tuple[int, int, int]]:
    """Every ``(t, p, d)`` with ``t p d = n_gpus`` the model and batch allow."""
    for t in divisors(n_gpus):
        if (o.tp is not None and t not in o.tp) or not times.supports_tp(t):
            continue
        for p in divisors(n_gpus // t):
            if (o.pp is not None and p not in o.pp) or p > len(model.layers):
                continue
            d = n_gpus // (t * p)
            if global_batch % d == 0:
                yield t, p, d


def _bound(
    model: ModelSpec,
    gpu: GpuSpec,
    times: LayerTimes,
    batch: int,
    shape: tuple[int, int, int],
    c: Constants,
) -> tuple[float, bool]:
    """(a lower bound on the iteration time, whether the weights could fit at all)."""
    t, p, d = shape
    share = sum(x.param_bytes for x in model.layers if not x.shared_params) / (t * p)
    fits = c.state_bytes_per_param_byte * share <= gpu.usable_memory
    compute = batch * times.min_compute_s(t) / (p * d)
    return compute + allreduce_s(share, d, gpu.group_bw(t * d), c), fits


def plan(
    model: ModelSpec,
    gpu: GpuSpec,
    n_gpus: int,
    global_batch: int,
    options: PlanOptions | None = None,
    profile: ProfiledTimes | None = None,
) -> list[Plan]:
    """The best plans for training ``model`` on ``n_gpus`` GPUs of type ``gpu``, fastest
    first; empty if nothing fits. ``profile`` replaces the analytic compute model."""
    o = options or PlanOptions()
    if n_gpus < 1 or global_batch < 1:
        raise ValueError(f"n_gpus and global_batch must be >= 1, got {n_gpus}, {global_batch}")
    c = o.constants if o.constants is not None else constants_for(gpu)
    times: LayerTimes = profile if profile is not None else AnalyticTimes(model, gpu, c)
    recomputes = {"auto": (False, True), "always": (True,), "never": (False,)}[o.recompute]
    todo = []
    for shape in shapes(model, times, n_gpus, global_batch, o):
        lb, fits = _bound(model, gpu, times, global_batch, shape, c)
        if fits or not o.prune:
            todo.append((lb, shape))
    todo.sort()
    kept: list[tuple[float, int, Plan]] = []  # a heap of the top_k, slowest first
    best_of: dict[tuple[int, int, int], Plan] = {}
    evaluated = 0
    for lb, (t, p, d) in todo:
        if o.prune and len(kept) >= o.top_k and lb >= -kept[0][0]:
            break
        for b, sched, v, rc in _configs(global_batch // d, o, profile, recomputes):
            m = global_batch // (d * b)
            if o.prune and _hopeless(times, t, p, b, v, rc, m, best_of.get((t, p, d)), kept, o):
                continue
            got = evaluate(
                model, gpu, times, global_batch, t, p, d, b, sched, v, rc, o.partition, c
            )
            evaluated += 1
            if got is not None:
                kept = _keep(kept, best_of, got, evaluated, o)
    log.debug("planned %s on %d %s: %d configurations", model.name, n_gpus, gpu.name, evaluated)
    return [x[2] for x in sorted(kept, key=lambda x: (-x[0], x[1]))]


def _hopeless(
    times: LayerTimes,
    t: int,
    p: int,
    b: int,
    v: int,
    recompute: bool,
    m: int,
    shape_best: Plan | None,
    kept: list[tuple[float, int, Plan]],
    o: PlanOptions,
) -> bool:
    """Whether one configuration cannot enter the ranking, judged before partitioning:
    its pipeline alone takes at least ``(m + (p - 1)/v)`` times an even share of the
    layers (any split has a device at or above the mean)."""
    mean = sum(times.times(t, b, recompute)) / p
    bound = (m + (p - 1) / (p * v)) * mean
    if shape_best is not None and o.distinct_shapes:
        return bound >= shape_best.iteration_s
    return len(kept) >= o.top_k and bound >= -kept[0][0]


def _configs(
    per_replica: int, o: PlanOptions, profile: ProfiledTimes | None, recomputes: tuple[bool, ...]
) -> Iterator[tuple[int, Schedule, int, bool]]:
    """Every (microbatch, schedule, chunks, recompute) to try for one shape."""
    for b in _microbatches(per_replica, o, profile):
        for sched in o.schedules:
            for v in o.chunks if sched == "interleaved" else (1,):
                for rc in recomputes:
                    yield b, sched, v, rc


def _keep(
    kept: list[tuple[float, int, Plan]],
    best_of: dict[tuple[int, int, int], Plan],
    got: Plan,
    order: int,
    o: PlanOptions,
) -> list[tuple[float, int, Plan]]:
    """Add ``got`` to the heap of the ``top_k`` best (one per shape if asked)."""
    if o.distinct_shapes:
        old = best_of.get(got.shape)
        if old is not None and old.iteration_s <= got.iteration_s:
            return kept
        best_of[got.shape] = got
        kept = [x for x in kept if x[2].shape != got.shape]
        heapq.heapify(kept)
    heapq.heappush(kept, (-got.iteration_s, order, got))
    if len(kept) > o.top_k:
        heapq.heappop(kept)
    return kept


def _microbatches(per_replica: int, o: PlanOptions, profile: ProfiledTimes | None) -> list[int]:
    allowed = profile.microbatch_sizes() if profile is not None else None
    out = []
    for b in divisors(per_replica):
        if b > o.max_microbatch:
            break
        if (o.microbatches is None or b in o.microbatches) and (allowed is None or b in allowed):
            out.append(b)
    return out
