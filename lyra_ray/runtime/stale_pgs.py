"""Placement groups no node can ever hold: a run's, pinned to a node that is gone.

Found live (issue #45): a node is taken away while a run's Train controller is creating
its worker group again after the failure; lyra drops the run (its node is down) and kills
its actors; the placement group the controller had just asked for, each bundle pinned by
label to the dead node's id (the placer's choice, ``ray.io/node-id``), stayed PENDING
for good. It holds no GPU, but Ray's autoscaler counts it as demand for one: it kept an
idle autoscaled node from being released (and, with no node to fit, it would start one).

After a node loss the executor sweeps for a while (:data:`SWEEP_FOR_S`): every placement
group still waiting to be placed (PENDING or RESCHEDULING) that has a bundle pinned to
nodes none of which is alive is removed. A placement group pinned to a live node, or not
pinned at all, is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from lyra_ray.contract.labels import NODE_ID_LABEL

log = logging.getLogger(__name__)

SWEEP_FOR_S = 120.0
"""How long after a node loss the sweep runs (a controller may ask for its placement
group again some seconds after the node went)."""
SWEEP_EVERY_S = 10.0
WAITING = ("PENDING", "RESCHEDULING")


def _pinned_nodes(bundle: Mapping[str, Any]) -> set[str] | None:
    """The node ids a bundle's label selector allows (None: not pinned to a node).

    The State API gives a selector as Ray's label-selector strings (``{"ray.io/node-id":
    "<id>"}``, ``"in(a,b)"``; ``"!x"`` or ``"!in(...)"`` exclude, and pin nothing); the
    protobuf form (``label_constraints``) is read too."""
    selector = bundle.get("label_selector") or {}
    if "label_constraints" in selector:
        for c in selector.get("label_constraints") or ():
            op = str(c.get("operator", ""))
            if c.get("label_key") == NODE_ID_LABEL and op.endswith("_IN") and "NOT" not in op:
                return {str(v) for v in c.get("label_values") or ()}
        return None
    value = selector.get(NODE_ID_LABEL)
    if not isinstance(value, str) or value.startswith("!"):
        return None
    if value.startswith("in(") and value.endswith(")"):
        return {v.strip() for v in value[3:-1].split(",") if v.strip()}
    return {value}


def unplaceable(groups: Iterable[Mapping[str, Any]], alive: set[str]) -> list[str]:
    """Ids of the waiting placement groups with a bundle pinned only to dead nodes."""
    out = []
    for g in groups:
        if g.get("state") not in WAITING:
            continue
        for b in g.get("bundles") or ():
            nodes = _pinned_nodes(b)
            if nodes is not None and not nodes & alive:
                out.append(str(g["placement_group_id"]))
                break
    return out


def remove_unplaceable() -> list[str]:
    """Find and remove them on the connected cluster; their ids."""
    import ray
    from ray.util.placement_group import PlacementGroup, remove_placement_group
    from ray.util.state import list_placement_groups

    groups = [
        g if isinstance(g, dict) else vars(g)
        for g in list_placement_groups(
            detail=True, filters=[("state", "!=", "REMOVED")], raise_on_missing_output=False
        )
    ]
    alive = {str(n["NodeID"]) for n in ray.nodes() if n["Alive"]}  # type: ignore[no-untyped-call]
    stale = unplaceable(groups, alive)
    for pg_id in stale:
        log.info("removing placement group %s: pinned to a node that is gone", pg_id)
        remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(pg_id))))
    return stale


class Sweep:
    """When to sweep: for :data:`SWEEP_FOR_S` after each node loss, at most every
    :data:`SWEEP_EVERY_S`. A failed sweep is logged and never stops the caller's cycle."""

    def __init__(self) -> None:
        self.until = 0.0
        self.last = 0.0

    def after_poll(self, node_lost: bool, now: float) -> None:
        if node_lost:
            self.until = now + SWEEP_FOR_S
        if now < self.until and now - self.last >= SWEEP_EVERY_S:
            self.last = now
            try:
                remove_unplaceable()
            except Exception:
                log.warning("sweeping stale placement groups failed", exc_info=True)
