"""The node types a cluster may grow by: what one node offers, how many there may be, what
an hour of one costs.

One parser for ``available_node_types``, the section of cluster.yaml that Ray's autoscaler
reads: the scheduler's requests (:mod:`lyra_ray.autoscale`), the fake provider's config
(:mod:`lyra_ray.ops.autoscaling_config`) and the KubeRay manifests' test all read node
types through it, so that what lyra asks for and what the autoscaler can start cannot
drift apart. Bad input is refused naming the field (``available_node_types.a100.
max_workers``), at the boundary, before anything starts.

A node type is lyra's when it has GPUs; its GPU type is its ``gpu-type`` label (else its
``accelerator_type:X`` resource) and its pool its ``pool`` label (``training`` by
default), as the inventory reads a running node (:mod:`lyra_ray.runtime.inventory`).
The label keys are passed in: the model imports nothing of ours above it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.prices import gpu_hour_prices, instance_prices
from lyra_ray.model.types import GpuType, Pool

MAX_NODES = 10_000
"""More workers of one type than any cluster lyra is meant for: a typo, refused."""
MAX_PRICE = 1e6
"""USD per node-hour above which a price is a typo."""
_ACCEL = "accelerator_type:"
INSTANCE_KEYS = ("InstanceType", "machineType", "vmSize")
"""Where AWS, GCP and Azure node configs name the instance type (its list price)."""


@dataclass(frozen=True, slots=True)
class NodeType:
    """One worker node type of the cluster config, as lyra schedules and pays for it."""

    name: str
    gpu_type: GpuType
    gpus: int
    pool: Pool
    min_workers: int
    max_workers: int
    usd_per_hour: float
    price_source: str
    """Where :attr:`usd_per_hour` comes from (an instance's list price, the config)."""
    resources: tuple[tuple[str, float], ...]
    """What one node offers, in Ray's resource names, sorted: the bundle lyra asks the
    autoscaler for to get one node of this type (its ``accelerator_type`` resource is
    1 per node, so one bundle fits one node of this type and no other)."""
    labels: tuple[tuple[str, str], ...] = ()

    def bundle(self) -> dict[str, float]:
        return dict(self.resources)

    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpus


def _number(v: Any, where: str, *, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"{where}: must be a number, got {v!r}"[:300])
    try:
        ok = math.isfinite(v) and v >= 0
    except OverflowError:
        ok = False
    if not ok:
        raise InputError(f"{where}: must be a finite number >= 0, got {v!r}"[:300])
    if integer and float(v) != int(v):
        raise InputError(f"{where}: must be a whole number, got {v!r}")
    return float(v)


def _count(v: Any, where: str) -> int:
    n = int(_number(v, where, integer=True))
    if n > MAX_NODES:
        raise InputError(f"{where}: at most {MAX_NODES:,}, got {v!r}")
    return n


def parse_price(v: Any, where: str) -> float:
    """A price in USD per node-hour: a finite number in (0, :data:`MAX_PRICE`]."""
    p = _number(v, where)
    if not 0 < p <= MAX_PRICE:
        raise InputError(f"{where}: must be in (0, {MAX_PRICE:g}] USD per node-hour, got {v!r}")
    return p


def _price(
    name: str, spec: Mapping[str, Any], gpu: GpuType, gpus: int, prices: Mapping[str, Any]
) -> tuple[float, str]:
    if name in prices:
        return parse_price(prices[name], f"autoscale.prices.{name}"), "lyra: autoscale.prices"
    config = spec.get("node_config")
    instance = None
    if isinstance(config, Mapping):
        instance = next((config[k] for k in INSTANCE_KEYS if isinstance(config.get(k), str)), None)
    listed = instance_prices()
    if instance in listed:
        return listed[instance], f"{instance} on-demand list price"
    per_gpu = gpu_hour_prices().get(gpu)
    if per_gpu is not None:
        return per_gpu * gpus, f"{gpus} x the {gpu} GPU-hour list price"
    raise InputError(
        f"available_node_types.{name}: no list price for its instance "
        f"({instance or 'none named'}) or GPU type {gpu!r}: set autoscale.prices.{name}"
    )


def _resources(name: str, spec: Mapping[str, Any]) -> dict[str, float]:
    raw = spec.get("resources", {})
    if not isinstance(raw, Mapping):
        raise InputError(f"available_node_types.{name}.resources: must be a mapping")
    out: dict[str, float] = {}
    for k, v in raw.items():
        if not isinstance(k, str) or not k:
            raise InputError(f"available_node_types.{name}.resources: bad name {k!r}"[:300])
        out[k] = _number(v, f"available_node_types.{name}.resources.{k}")
    return out


def _labels(name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    raw = spec.get("labels", {})
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise InputError(f"available_node_types.{name}.labels: must map names to strings")
    return dict(raw)


def parse_node_types(
    available: Any,
    *,
    head: str | None,
    cluster_max_workers: int | None = None,
    prices: Mapping[str, Any] | None = None,
    gpu_label: str = "gpu-type",
    pool_label: str = "pool",
) -> tuple[NodeType, ...]:
    """The GPU node types of ``available_node_types`` (the head's and CPU-only types are
    not lyra's), sorted by name. ``prices``: USD per node-hour by node type name, over
    the list prices (:mod:`lyra_ray.model.prices`)."""
    if not isinstance(available, Mapping) or not available:
        raise InputError("available_node_types: must be a non-empty mapping of node types")
    prices = dict(prices or {})
    unknown = sorted(map(str, set(prices) - set(map(str, available))))
    if unknown:
        raise InputError(f"autoscale.prices: no such node type(s) {unknown}")
    cap = MAX_NODES if cluster_max_workers is None else cluster_max_workers
    out: list[NodeType] = []
    for name, spec in sorted(available.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            raise InputError(f"available_node_types.{name}: must be a mapping")
        if name == head:
            continue
        res = _resources(name, spec)
        gpus = int(
            _number(res.get("GPU", 0), f"available_node_types.{name}.resources.GPU", integer=True)
        )
        if gpus == 0:
            continue
        labels = _labels(name, spec)
        accel = [k[len(_ACCEL) :] for k in res if k.startswith(_ACCEL)]
        raw_gpu = labels.get(gpu_label) or (accel[0] if accel else None)
        if raw_gpu is None:
            raise InputError(
                f"available_node_types.{name}.labels.{gpu_label}: required (or an "
                f"'{_ACCEL}X' resource): the GPU type lyra schedules the node's GPUs as"
            )
        pool = labels.get(pool_label, "training")
        if pool not in ("training", "inference"):
            raise InputError(
                f"available_node_types.{name}.labels.{pool_label}: 'training' or "
                f"'inference', got {pool!r}"[:300]
            )
        where = f"available_node_types.{name}"
        lo = _count(spec.get("min_workers", 0), f"{where}.min_workers")
        hi = _count(spec.get("max_workers", cap), f"{where}.max_workers")
        if lo > hi:
            raise InputError(f"{where}.min_workers: {lo} is above max_workers {hi}")
        gpu = raw_gpu.lower()
        usd, source = _price(name, spec, gpu, gpus, prices)
        resources = {k: v for k, v in res.items() if k not in ("memory", "object_store_memory")}
        out.append(
            NodeType(
                name=name,
                gpu_type=gpu,
                gpus=gpus,
                pool="inference" if pool == "inference" else "training",
                min_workers=lo,
                max_workers=hi,
                usd_per_hour=usd,
                price_source=source,
                resources=tuple(sorted(resources.items())),
                labels=tuple(sorted(labels.items())),
            )
        )
    seen: dict[tuple[str, str, int], str] = {}
    for t in out:
        key = (t.gpu_type, t.pool, t.gpus)
        if key in seen:
            raise InputError(
                f"available_node_types.{t.name}: same GPU type, pool and GPU count as "
                f"{seen[key]!r}; lyra could not tell their nodes apart"
            )
        seen[key] = t.name
    return tuple(out)


def node_type_of(
    types: tuple[NodeType, ...], gpu_type: GpuType, pool: str, gpus: int
) -> NodeType | None:
    """The node type a running node (its GPU type, pool and GPU count) belongs to."""
    for t in types:
        if t.gpu_type == gpu_type and t.pool == pool and t.gpus == gpus:
            return t
    return None
