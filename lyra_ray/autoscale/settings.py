"""The ``autoscale:`` block of the ``lyra:`` section, checked at the boundary.

::

    autoscale:
      enabled: true            # ask the autoscaler for nodes (default false)
      budget_usd: 2000         # at most this spent on nodes above min_workers (none: no cap)
      budget_node_hours: null  # the same cap counted in node-hours
      max_usd_per_hour: 150    # the nodes above min_workers kept at once cost at most this
      commit_hours: 1.0        # a new node only while the budget covers this long of it
      prices: {a100: 21.96}    # USD per node-hour by node type, over the list prices

The node types themselves are cluster.yaml's ``available_node_types``: ``lyra up
--config`` puts them (and ``head_node_type``, ``max_workers``) under ``cluster`` when it
reads the file (:func:`lyra_ray.ops.local.lyra_section`), so they are never written
twice. Every refusal names the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.node_types import MAX_NODES, NodeType, parse_node_types

FIELDS = (
    "enabled",
    "budget_usd",
    "budget_node_hours",
    "max_usd_per_hour",
    "commit_hours",
    "prices",
    "cluster",
)
MAX_BUDGET = 1e12
"""A budget above this (USD, node-hours) is a typo; leave the field out for no cap."""


@dataclass(frozen=True)
class AutoscaleSettings:
    enabled: bool = False
    budget_usd: float | None = None
    budget_node_hours: float | None = None
    max_usd_per_hour: float | None = None
    commit_hours: float = 1.0
    """A node is added only while the budget left covers this many hours of it: clouds
    bill by the second, but a node that is started to be stopped minutes later wastes
    its start-up, and a budget that runs out mid-job strands the job's work."""
    cluster_max_workers: int = MAX_NODES
    node_types: tuple[NodeType, ...] = ()

    def possible_gpus(self) -> dict[str, int]:
        """GPUs per training GPU type the autoscaler could add: what a job may ask for."""
        out: dict[str, int] = {}
        for t in self.node_types:
            if t.pool == "training":
                out[t.gpu_type] = out.get(t.gpu_type, 0) + t.gpus * t.max_workers
        return out

    def gpu_hour_prices(self) -> dict[str, float]:
        """USD per GPU-hour by GPU type, from the node types' prices (the cheapest type
        of each GPU type): what Gavel's cost policies weigh throughput against."""
        out: dict[str, float] = {}
        for t in self.node_types:
            p = t.usd_per_gpu_hour()
            out[t.gpu_type] = min(out.get(t.gpu_type, p), p)
        return out


def _optional(raw: Mapping[str, Any], key: str, *, positive: bool = True) -> float | None:
    v = raw.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"lyra config: field 'autoscale.{key}': must be a number, got {v!r}"[:300])
    try:
        ok = math.isfinite(v) and (v > 0 if positive else v >= 0) and v <= MAX_BUDGET
    except OverflowError:
        ok = False
    if not ok:
        raise InputError(
            f"lyra config: field 'autoscale.{key}': must be a finite number in "
            f"{'(0' if positive else '[0'}, {MAX_BUDGET:g}], got {v!r}"[:300]
        )
    return float(v)


def parse_autoscale(
    raw: Any, gpu_label: str = "gpu-type", pool_label: str = "pool"
) -> AutoscaleSettings:
    """The checked settings; ``None`` or ``{}``: autoscaling off."""
    if raw is None:
        return AutoscaleSettings()
    if not isinstance(raw, Mapping):
        raise InputError("lyra config: field 'autoscale': must be a mapping")
    unknown = sorted(map(str, set(raw) - set(FIELDS)))
    if unknown:
        raise InputError(
            f"lyra config: field 'autoscale': unknown {unknown}; known: {list(FIELDS)}"
        )
    enabled = raw.get("enabled", False)
    if not isinstance(enabled, bool):
        raise InputError(
            f"lyra config: field 'autoscale.enabled': true or false, got {enabled!r}"[:300]
        )
    commit = _optional(raw, "commit_hours", positive=False)
    prices = raw.get("prices") or {}
    if not isinstance(prices, Mapping):
        raise InputError("lyra config: field 'autoscale.prices': must map node types to USD/hour")
    cluster = raw.get("cluster")
    types: tuple[NodeType, ...] = ()
    cap = MAX_NODES
    if cluster is not None:
        if not isinstance(cluster, Mapping):
            raise InputError("lyra config: field 'autoscale.cluster': must be a mapping")
        top = cluster.get("max_workers", MAX_NODES)
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_NODES:
            raise InputError(f"max_workers: a whole number in [0, {MAX_NODES}], got {top!r}"[:300])
        cap = top
        head = cluster.get("head_node_type")
        types = parse_node_types(
            cluster.get("available_node_types"),
            head=head if isinstance(head, str) else None,
            cluster_max_workers=cap,
            prices=prices,
            gpu_label=gpu_label,
            pool_label=pool_label,
        )
    elif prices:
        raise InputError("lyra config: field 'autoscale.prices': no node types to price")
    if enabled and not types:
        raise InputError(
            "lyra config: field 'autoscale.enabled': no GPU node types to ask for; "
            "start lyra with --config cluster.yaml (its available_node_types)"
        )
    return AutoscaleSettings(
        enabled=enabled,
        budget_usd=_optional(raw, "budget_usd", positive=False),
        budget_node_hours=_optional(raw, "budget_node_hours", positive=False),
        max_usd_per_hour=_optional(raw, "max_usd_per_hour", positive=False),
        commit_hours=1.0 if commit is None else commit,
        cluster_max_workers=cap,
        node_types=types,
    )
