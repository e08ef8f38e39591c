"""GPU slots: one placement group of one bundle per worker of a run.

WHY one per worker rather than one per run (what Ray Train makes): Ray 2.60 cannot
change a placement group's bundles, only create and remove whole groups. With a group
per worker, a resize removes the slots of the workers that leave and adds slots for
those that join; the workers that stay keep theirs, and with them their GPUs, through
the resize. A slot is the GPU's only holder in Ray's eyes: the warm worker that runs on
it asks Ray for no GPU (:mod:`lyra_ray.runtime.gang_worker`), so it can outlive the
slot and wait, warm, for the next one.

Which GPU a bundle got is known only from inside a task or actor that runs in it
(Ray's placement-group table has the node, not the device: ray-project/ray#61715); on a
node with NVIDIA GPUs :func:`gpu_ids` asks a one-line task there. Fake-GPU nodes (no
device to bind) skip it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from lyra_ray.contract.labels import NODE_ID_LABEL

log = logging.getLogger(__name__)


@dataclass
class Slot:
    """One worker's GPU reservation."""

    pg: PlacementGroup
    gpus: float
    selector: Mapping[str, str]
    node_id: str | None = None
    """Known once the slot is placed (a selector without a node leaves it to Ray)."""
    gpu_ids: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def reserve(gpus: float, selector: Mapping[str, str]) -> Slot:
    """Ask Ray for one bundle of ``gpus`` GPUs where ``selector`` says (returns at once;
    the bundle is placed when the GPUs are free)."""
    pg = placement_group(
        [{"GPU": float(gpus)}], strategy="STRICT_PACK", bundle_label_selector=[dict(selector)]
    )
    return Slot(pg, float(gpus), dict(selector), selector.get(NODE_ID_LABEL))


def placed(slot: Slot, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the slot's GPUs; learns its node once placed."""
    if not slot.pg.wait(timeout_seconds=timeout_s):
        return False
    if slot.node_id is None:
        from ray.util.placement_group import placement_group_table

        slot.node_id = str(placement_group_table(slot.pg)["bundles_to_node_id"][0])
    return True


@ray.remote(num_cpus=0, max_calls=0)
def _bundle_gpu_ids() -> list[str]:
    return [str(g) for g in ray.get_gpu_ids()]


def gpu_ids(slot: Slot, timeout_s: float = 120.0) -> list[str]:
    """The GPU ids Ray gave the slot's bundle (a task placed in it reports them)."""
    task = _bundle_gpu_ids.options(
        num_gpus=slot.gpus,
        scheduling_strategy=PlacementGroupSchedulingStrategy(slot.pg, 0),
    )
    ids: list[str] = ray.get(task.remote(), timeout=timeout_s)
    slot.gpu_ids = ids
    return ids


def free(slot: Slot) -> None:
    """Give the slot's GPUs back (at once: a removed group holds nothing)."""
    try:
        remove_placement_group(slot.pg)
    except Exception:  # already gone (its owner died, or removed twice)
        log.debug("slot already removed", exc_info=True)
