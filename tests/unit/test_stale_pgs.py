"""Which placement groups the executor removes after a node loss: only waiting ones with
a bundle pinned to nodes none of which is alive (lyra_ray/runtime/stale_pgs.py)."""

from __future__ import annotations

from typing import Any

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.runtime.stale_pgs import unplaceable


def pg(pid: str, state: str, *pins: list[str] | None, op: str = "LABEL_OPERATOR_IN") -> Any:
    bundles = []
    for nodes in pins:
        sel = {}
        if nodes is not None:
            c = {"label_key": NODE_ID_LABEL, "operator": op, "label_values": nodes}
            sel = {
                "label_constraints": [
                    {"label_key": "gpu-type", "operator": op, "label_values": ["a100"]},
                    c,
                ]
            }
        bundles.append({"unit_resources": {"GPU": 1.0}, "label_selector": sel})
    return {"placement_group_id": pid, "state": state, "bundles": bundles}


def test_only_waiting_groups_pinned_to_dead_nodes_are_stale() -> None:
    alive = {"n1", "n2"}
    groups = [
        pg("dead", "PENDING", ["gone"]),
        pg("half", "RESCHEDULING", ["n1"], ["gone"]),  # one bundle can never be placed
        pg("either", "PENDING", ["gone", "n2"]),  # may still land on n2
        pg("live", "PENDING", ["n1"]),
        pg("free", "PENDING", None),  # not pinned to a node: it waits for capacity
        pg("placed", "CREATED", ["gone"]),  # holds its bundles: Ray's to reschedule
        pg("excluded", "PENDING", ["gone"], op="LABEL_OPERATOR_NOT_IN"),
        {"placement_group_id": "odd", "state": "PENDING"},
    ]
    assert unplaceable(groups, alive) == ["dead", "half"]
    assert unplaceable(groups, alive | {"gone"}) == []
