"""Lina's two-phase expert-replica planner, and the placement type every planner returns.

Phase 1 (ahead of time, from *estimated* loads): replica counts by the divisor method within
the replica budget, then packing of replicas onto devices (longest-first with a slot cap,
then pairwise swaps) so per-device load is balanced. Phase 2 (at serving time, from the
gate's *actual* counts): re-plan only the layers whose actual load shares deviate from the
shares the plan was made for by more than a threshold — re-planning costs replica moves, so
layers whose estimate held keep their replicas.

A replica carries ``load[expert] / count[expert]``; a device's load is the sum over the
replicas it hosts; quality is max/mean device load per layer (1.0 = perfect balance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from moe_serving.packing import apportion, expand, greedy_pack, refine_swaps

Loads = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Placement:
    """Where each layer's replicas live. Row i describes layer i (of the layers planned)."""

    replica_expert: Ints  # [L, R] logical expert of each physical replica
    replica_device: Ints  # [L, R] device hosting each physical replica
    devices: int
    slots: int
    planned_load: Loads  # [L, E] the loads the plan was made for

    @property
    def counts(self) -> Ints:
        """Replicas per expert [L, E]."""
        e = self.planned_load.shape[1]
        return np.stack([np.bincount(r, minlength=e) for r in self.replica_expert])


def check_shape(load: Loads, replicas: int, devices: int, slots: int) -> None:
    """Refuse impossible requests with a message naming the offending field."""
    if load.ndim != 2 or load.shape[1] < 1:
        raise ValueError(f"load must be [layers, experts], got shape {load.shape}")
    if not np.all(np.isfinite(load)) or np.any(load < 0):
        raise ValueError("load must hold finite, non-negative numbers")
    if devices < 1 or slots < 1:
        raise ValueError(f"devices ({devices}) and slots ({slots}) must be >= 1")
    if replicas < load.shape[1]:
        raise ValueError(f"replicas ({replicas}) must be >= experts ({load.shape[1]})")
    if replicas > devices * slots:
        raise ValueError(f"replicas ({replicas}) exceed devices*slots ({devices}*{slots})")


def default_slots(replicas: int, devices: int) -> int:
    """Slots per device when none are given: just enough to hold every replica."""
    return -(-replicas // devices)


def device_loads(load: Loads, plan: Placement) -> Loads:
    """Per-device load [L, G] when ``load`` [L, E] is served by ``plan``."""
    counts = plan.counts
    per_rep = np.take_along_axis(load / np.maximum(counts, 1), plan.replica_expert, axis=1)
    out = np.zeros((load.shape[0], plan.devices))
    for i in range(load.shape[0]):
        out[i] = np.bincount(plan.replica_device[i], weights=per_rep[i], minlength=plan.devices)
    return out


def max_over_mean(load: Loads, plan: Placement) -> Loads:
    """Max/mean device load per layer (nan for a layer with no load)."""
    dl = device_loads(load, plan)
    mean = dl.mean(1)
    out: Loads = np.where(mean > 0, dl.max(1) / np.where(mean > 0, mean, 1.0), np.nan)
    return out


def plan_lina(load: Loads, replicas: int, devices: int, slots: int | None = None) -> Placement:
    """Phase 1: counts by the divisor method, then balanced packing onto devices."""
    slots = default_slots(replicas, devices) if slots is None else slots
    check_shape(load, replicas, devices, slots)
    counts = apportion(load, replicas)
    experts, weights = expand(counts, load)
    device = greedy_pack(weights, devices, slots)
    device = refine_swaps(weights, device, devices, slots)
    return Placement(experts, device, devices, slots, load.astype(np.float64))


def shares(load: Loads) -> Loads:
    tot = load.sum(1, keepdims=True)
    out: Loads = np.where(tot > 0, load / np.where(tot > 0, tot, 1.0), 1.0 / load.shape[1])
    return out


def deviation(plan: Placement, actual: Loads) -> Loads:
    """Per-layer L1 distance between planned and actual load shares (0..2)."""
    out: Loads = np.abs(shares(plan.planned_load) - shares(actual)).sum(1)
    return out


def replan(plan: Placement, actual: Loads, threshold: float = 0.2) -> tuple[Placement, list[int]]:
    """Phase 2: re-plan the layers whose actual loads deviate past ``threshold``.

    Returns the new placement and the layers that changed; other layers keep their replicas.
    """
    bad = [int(i) for i in np.flatnonzero(deviation(plan, actual) > threshold)]
    if not bad:
        return plan, []
    fresh = plan_lina(actual[bad], plan.replica_expert.shape[1], plan.devices, plan.slots)
    rexp, rdev = plan.replica_expert.copy(), plan.replica_device.copy()
    planned = plan.planned_load.copy()
    rexp[bad], rdev[bad], planned[bad] = fresh.replica_expert, fresh.replica_device, actual[bad]
    return Placement(rexp, rdev, plan.devices, plan.slots, planned), bad
