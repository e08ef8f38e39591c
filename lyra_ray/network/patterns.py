"""Training steps as flow DAGs: data parallelism, tensor parallelism, FSDP.

Each builder returns the tasks of ``iterations`` steps of one job on the given servers,
labelled for every scheduler: one Coflow per collective, one EchelonFlow per step with
the offsets of :mod:`~lyra_ray.network.arrangement`. Computations are synchronous across
workers (one task stands for all of them), which is what a collective forces anyway.

Modelling choices, stated once:

- DP launches each layer's gradient all-reduce as soon as the backward pass produced
  it, and the all-reduces of a step may run concurrently (as parameter-server pushes or
  several communicators do); the network scheduler decides who gets the bandwidth.
- TP's collectives are on the critical path, one after another (Megatron: two
  all-reduces in the forward and two in the backward of every layer).
- FSDP issues every forward all-gather at the start of a step (full prefetch; real
  FSDP bounds it by memory), every backward all-gather when the forward ends, and each
  reduce-scatter when its layer's backward ends; the next step's all-gather of a layer
  waits for that layer's reduce-scatter (its shard was updated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lyra_ray.network import arrangement
from lyra_ray.network.collectives import Labels, all_gather, all_reduce, reduce_scatter
from lyra_ray.network.flows import Compute, Task


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer: compute times (s) and the bytes its collectives move per server."""

    forward_s: float
    backward_s: float
    param_bytes: float
    """Gradients all-reduced (DP), parameters gathered (FSDP)."""
    act_bytes: float = 0.0
    """Activations all-reduced after each half of the layer (TP)."""


def _check(job: str, servers: Sequence[str], layers: Sequence[Layer], iterations: int) -> None:
    if not job:
        raise ValueError("job: a job needs a name (it prefixes every task)")
    if not servers:
        raise ValueError(f"servers: job {job!r} has no servers")
    if not layers:
        raise ValueError(f"layers: job {job!r} has no layers")
    if iterations < 1:
        raise ValueError(f"iterations: must be >= 1, got {iterations}")


def data_parallel(
    job: str, servers: Sequence[str], layers: Sequence[Layer], iterations: int = 2
) -> list[Task]:
    """Ring all-reduce per layer; the next step's forward of layer ``k`` waits for it."""
    _check(job, servers, layers, iterations)
    offsets = arrangement.data_parallel([x.forward_s for x in layers])
    last = len(layers) - 1
    tasks: list[Task] = []
    for i in range(iterations):
        for k, layer in enumerate(layers):
            deps = [f"{job}/f{i}.{k - 1}"] if k else ([f"{job}/b{i - 1}.0"] if i else [])
            if i:
                deps.append(f"{job}/ar{i - 1}.{k}.done")
            tasks.append(Compute(f"{job}/f{i}.{k}", layer.forward_s, tuple(deps), job=job))
        for k in range(last, -1, -1):
            prev = f"{job}/b{i}.{k + 1}" if k < last else f"{job}/f{i}.{last}"
            b = f"{job}/b{i}.{k}"
            tasks.append(Compute(b, layers[k].backward_s, (prev,), job=job))
            lab = Labels(job, echelon=f"{job}/it{i}", offset=offsets[k], cls=1)
            tasks += all_reduce(f"{job}/ar{i}.{k}", servers, layers[k].param_bytes, [b], lab)
    return tasks


def tensor_parallel(
    job: str, servers: Sequence[str], layers: Sequence[Layer], iterations: int = 2
) -> list[Task]:
    """Megatron's layer: compute half, all-reduce, compute half, all-reduce; forward
    then backward; every collective on the critical path."""
    _check(job, servers, layers, iterations)
    halves: list[tuple[float, float]] = []  # (compute before the collective, bytes)
    for x in layers:
        halves += [(x.forward_s / 2, x.act_bytes)] * 2
    for x in reversed(layers):
        halves += [(x.backward_s / 2, x.act_bytes)] * 2
    offsets = arrangement.tensor_parallel([c for c, _ in halves[1:]])
    tasks: list[Task] = []
    prev: list[str] = []
    for i in range(iterations):
        for k, (compute_s, nbytes) in enumerate(halves):
            c = f"{job}/c{i}.{k}"
            tasks.append(Compute(c, compute_s, tuple(prev), job=job))
            lab = Labels(job, echelon=f"{job}/it{i}", offset=offsets[k], cls=1)
            tasks += all_reduce(f"{job}/ar{i}.{k}", servers, nbytes, [c], lab)
            prev = [f"{job}/ar{i}.{k}.done"]
    return tasks


def fsdp(
    job: str, servers: Sequence[str], layers: Sequence[Layer], iterations: int = 2
) -> list[Task]:
    """ZeRO-3 / FSDP: all-gather each layer's parameters before its forward and again
    before its backward, reduce-scatter its gradients after."""
    _check(job, servers, layers, iterations)
    ag_f, ag_b, rs = arrangement.fsdp([x.forward_s for x in layers], [x.backward_s for x in layers])
    last = len(layers) - 1
    tasks: list[Task] = []
    for i in range(iterations):
        ech = f"{job}/it{i}"
        for k, layer in enumerate(layers):
            deps = [f"{job}/rs{i - 1}.{k}.done"] if i else []
            lab = Labels(job, echelon=ech, offset=ag_f[k], cls=1)
            tasks += all_gather(f"{job}/agf{i}.{k}", servers, layer.param_bytes, deps, lab)
            fdeps = [f"{job}/agf{i}.{k}.done"]
            fdeps += [f"{job}/f{i}.{k - 1}"] if k else ([f"{job}/b{i - 1}.0"] if i else [])
            tasks.append(Compute(f"{job}/f{i}.{k}", layer.forward_s, tuple(fdeps), job=job))
        fwd_end = f"{job}/f{i}.{last}"
        for k in range(last, -1, -1):
            lab = Labels(job, echelon=ech, offset=ag_b[k], cls=1)
            tasks += all_gather(f"{job}/agb{i}.{k}", servers, layers[k].param_bytes, [fwd_end], lab)
            prev = f"{job}/b{i}.{k + 1}" if k < last else fwd_end
            b = f"{job}/b{i}.{k}"
            bdeps = (prev, f"{job}/agb{i}.{k}.done")
            tasks.append(Compute(b, layers[k].backward_s, bdeps, job=job))
            lab = Labels(job, echelon=ech, offset=rs[k], cls=1)
            tasks += reduce_scatter(f"{job}/rs{i}.{k}", servers, layers[k].param_bytes, [b], lab)
    return tasks
