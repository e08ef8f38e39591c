"""Where a live MoE service's expert replicas run: Lina's plan over the serving GPUs.

WHY its own module: the plan is the part of the MoE service that must be right whatever
Serve does, so it is plain numpy, testable without a cluster. A *device* is one GPU of a
serving inference server; each holds ``slots`` expert replicas of every layer. The
replica budget of a layer is ``devices * slots``: lending a server lowers it, and the
plan is made again onto the devices left, by the planner for the batch regime
(``planner.plan_for_regime``): it minimises the predicted expert step time over the step
sizes the service has seen (its ``BatchHistogram``), for the devices' cost model, so a
service that runs decode-sized steps is not given token balance that makes it slower.

Which chunk goes to which device is decided here too (:meth:`RoutingTable.devices_for`):
an expert's chunks go one to each of its replicas, and chunks a request borrows onto
another expert's replicas (``lyra_ray.moe_serving.dynamic``) go to that expert's replicas it
leaves idle, so no replica gets two chunks of one request-layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.planner import Placement, plan_for_regime, plan_lina, shares

Loads = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Device:
    node: str
    index: int
    """The GPU's index on its server (its deployment is ``gpu<index>``)."""


def devices_of(servers: dict[str, int]) -> list[Device]:
    """The devices of ``servers`` ({node id: GPUs}), in a fixed order."""
    return [Device(node, k) for node in sorted(servers) for k in range(servers[node])]


def plan_devices(
    load: Loads,
    devices: int,
    slots: int,
    regime: Sequence[tuple[float, float]] | None = None,
    cost: ExpertCost | None = None,
) -> Placement:
    """Phase 1 over ``devices`` GPUs of ``slots`` replicas per layer each: the plan for the
    batch ``regime`` (``(tokens per step, weight)`` pairs) under the devices' ``cost``;
    without them, Lina's token balance (the uniform baseline passes even loads).

    A layer with no load yet is planned as if its experts were equally popular.
    """
    load = np.asarray(load, dtype=np.float64)
    flat = load.sum(1, keepdims=True) <= 0
    load = np.where(flat, 1.0, load)
    if regime is None or cost is None:
        return plan_lina(load, devices * slots, devices, slots)
    return plan_for_regime(load, devices * slots, devices, regime, cost, slots)


@dataclass
class RoutingTable:
    """One plan, with the devices it runs on; requests keep the table they started with."""

    devices: list[Device]
    placement: Placement
    active: int = 0
    """Requests in flight that route by this table."""
    replicas: list[list[list[int]]] = field(init=False)
    """[layer][expert] -> the devices holding a replica of that expert."""

    def __post_init__(self) -> None:
        layers, experts = self.placement.planned_load.shape
        self.replicas = [[[] for _ in range(experts)] for _ in range(layers)]
        for layer in range(layers):
            for e, d in zip(
                self.placement.replica_expert[layer],
                self.placement.replica_device[layer],
                strict=True,
            ):
                self.replicas[layer][int(e)].append(int(d))

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(d.node for d in self.devices)

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        return self.placement.counts

    def hosted(self, device: int) -> list[tuple[int, int]]:
        """(layer, expert) of every replica the plan puts on ``device``."""
        p = self.placement
        return [
            (layer, int(e))
            for layer in range(p.replica_expert.shape[0])
            for e, d in zip(p.replica_expert[layer], p.replica_device[layer], strict=True)
            if int(d) == device
        ]

    def devices_for(self, layer: int, hosts: list[list[int]]) -> list[list[int]]:
        """For each expert's chunks (``hosts[e]``: the expert whose replica runs each
        chunk), the device that runs it: each replica of a host takes at most one chunk."""
        used = [0] * len(self.replicas[layer])
        out: list[list[int]] = []
        for chunk_hosts in hosts:
            row = []
            for h in chunk_hosts:
                reps = self.replicas[layer][h]
                row.append(reps[used[h] % len(reps)])
                used[h] += 1
            out.append(row)
        return out

    def summary(self) -> dict[str, object]:
        """What ``lyra status`` and the tests read: budget, servers and counts."""
        servers: dict[str, int] = {}
        for d in self.devices:
            servers[d.node] = servers.get(d.node, 0) + 1
        return {
            "servers": servers,
            "devices": len(self.devices),
            "slots": self.placement.slots,
            "budget_per_layer": self.placement.devices * self.placement.slots,
            "replicas_per_layer": int(self.placement.replica_expert.shape[1]),
            "counts": self.counts.tolist(),
            "planned_share": np.round(shares(self.placement.planned_load), 4).tolist(),
        }
