"""Predict one configuration: partition the layers, then time and size the iteration.

Ranks are laid out as Megatron-LM does: tensor ranks innermost, then data, then
pipeline. So a tensor group spans ``t`` consecutive GPUs, a data-parallel group ``t d``,
and pipeline stage ``k`` starts at GPU ``k t d``: whether a stage boundary crosses servers
depends on where it falls, which is what lets the partitioner give a stage behind a slow
boundary fewer layers. A boundary that crosses servers with ``t > 1`` sends ``1/t`` of
the activation per GPU and gathers it over NVLink (the paper's scatter/gather).

iteration = pipeline (schedule over per-device microbatch times)
          + data-parallel gradient all-reduce (after the flush, not overlapped)
          + optimizer step (memory-bound)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lyra_ray.parallelism import memory, partition, schedule
from lyra_ray.parallelism.cost import Constants, allreduce_s
from lyra_ray.parallelism.hardware import GpuSpec
from lyra_ray.parallelism.layers import ModelSpec
from lyra_ray.parallelism.plan import Partition, Plan


class LayerTimes(Protocol):
    def supports_tp(self, t: int) -> bool: ...
    def times(self, t: int, b: int, recompute: bool) -> list[float]: ...
    def min_compute_s(self, t: int) -> float: ...


def _server(rank: int, gpu: GpuSpec) -> int:
    return rank // gpu.gpus_per_server


def boundary_links(gpu: GpuSpec, t: int, d: int, p: int, v: int) -> list[float]:
    """Seconds per byte across each (virtual) stage boundary, per GPU."""
    links = []
    for j in range(p * v - 1):
        a, b = (j % p) * t * d, ((j + 1) % p) * t * d
        if _server(a, gpu) == _server(b, gpu):
            links.append(1.0 / gpu.intra_bw)
        else:
            links.append(1.0 / (gpu.inter_bw * t))  # scatter/gather: each GPU sends 1/t
    return links


def evaluate(
    model: ModelSpec,
    gpu: GpuSpec,
    times: LayerTimes,
    global_batch: int,
    t: int,
    p: int,
    d: int,
    b: int,
    sched: schedule.Schedule,
    v: int,
    recompute: bool,
    how: Partition,
    c: Constants,
) -> Plan | None:
    """The plan for one configuration, or ``None`` if it cannot run or does not fit."""
    n_layers = len(model.layers)
    if global_batch % (d * b):
        return None
    m = global_batch // (d * b)
    k = p * v
    if k > n_layers or not schedule.valid(sched, p, m, v, n_layers // p):
        return None
    lt = times.times(t, b, recompute)
    mem = memory.layer_memory(model, t, b, recompute, c)
    out = [b * layer.out_bytes for layer in model.layers]
    links = boundary_links(gpu, t, d, p, v)
    flights = [schedule.in_flight(sched, s % p, p, m, v) for s in range(k)]
    inputs = partition.StageInputs(
        time=lt,
        out=out,
        link=links,
        static=mem.static,
        act=mem.act,
        work=mem.work,
        in_flight=flights,
        mem_cap=gpu.usable_memory if v == 1 else float("inf"),
    )
    sizes: Sequence[int] | None
    if how == "even":
        sizes = partition.even_split(n_layers, k, model.ends_attached)
    else:
        sizes = partition.balanced_split(inputs, k)
    if sizes is None:
        return None
    per_stage = partition.stage_times(inputs, sizes)
    starts = [sum(sizes[:s]) for s in range(k)]
    device_t = [0.0] * p
    device_layers: list[list[int]] = [[] for _ in range(p)]
    for s in range(k):
        hops = (s > 0) + (s < k - 1)
        device_t[s % p] += per_stage[s] + 2 * hops * c.collective_latency_s
        device_layers[s % p] += range(starts[s], starts[s] + sizes[s])
    peak_mem = max(
        memory.device_memory(mem, model, device_layers[dev], flights[dev]) for dev in range(p)
    )
    if peak_mem > gpu.usable_memory:
        return None
    pipe = schedule.pipeline_time(device_t, m, v)
    params = [
        sum(model.layers[i].param_bytes for i in ids) / t for ids in device_layers
    ]  # fp16 gradient bytes to all-reduce per GPU, and 2x the parameter count
    dp = max(allreduce_s(x, d, gpu.group_bw(t * d), c) for x in params)
    opt = max(params) / 2 * c.optimizer_bytes_per_param / gpu.hbm_bw
    iteration = pipe + dp + opt
    slowest = max(device_t)
    flops = global_batch * model.train_flops_per_sample(recompute)
    return Plan(
        gpu=gpu.name,
        n_gpus=t * p * d,
        global_batch=global_batch,
        t=t,
        p=p,
        d=d,
        microbatch=b,
        num_microbatches=m,
        schedule=sched,
        chunks=v,
        recompute=recompute,
        stages=tuple(sizes),
        iteration_s=iteration,
        pipeline_s=pipe,
        dp_s=dp,
        optimizer_s=opt,
        memory_bytes=peak_mem,
        bubble=(pipe - m * slowest) / (m * slowest),
        tflops_per_gpu=flops / (t * p * d) / iteration / 1e12,
    )
