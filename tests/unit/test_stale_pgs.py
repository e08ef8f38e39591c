"""Which placement groups the executor removes after a node loss: only waiting ones with
a bundle pinned to nodes none of which is alive (lyra_ray/runtime/stale_pgs.py)."""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.runtime import stale_pgs
from lyra_ray.runtime.stale_pgs import Sweep, unplaceable


def pg(pid: str, state: str, *pins: str | None, proto: bool = False) -> Any:
    """A placement group as the State API lists it; each bundle pinned by ``pins``: a
    label-selector value for the node id (``"n1"``, ``"in(a,b)"``, ``"!n1"``) or None."""
    bundles = []
    for value in pins:
        sel: dict[str, Any] = {"gpu-type": "a100"}
        if value is not None:
            sel[NODE_ID_LABEL] = value
        if proto and value is not None:  # the protobuf form of the same selector
            op = "LABEL_OPERATOR_NOT_IN" if value.startswith("!") else "LABEL_OPERATOR_IN"
            vals = value.strip("!").removeprefix("in(").removesuffix(")").split(",")
            c = {"label_key": NODE_ID_LABEL, "operator": op, "label_values": vals}
            sel = {"label_constraints": [c]}
        bundles.append({"unit_resources": {"GPU": 1.0}, "label_selector": sel})
    return {"placement_group_id": pid, "state": state, "bundles": bundles}


def test_only_waiting_groups_pinned_to_dead_nodes_are_stale() -> None:
    alive = {"n1", "n2"}
    groups = [
        pg("dead", "PENDING", "gone"),
        pg("half", "RESCHEDULING", "n1", "gone"),  # one bundle can never be placed
        pg("either", "PENDING", "in(gone,n2)"),  # may still land on n2
        pg("live", "PENDING", "n1"),
        pg("free", "PENDING", None),  # not pinned to a node: it waits for capacity
        pg("placed", "CREATED", "gone"),  # holds its bundles: Ray's to reschedule
        pg("excluded", "PENDING", "!gone"),
        pg("proto", "PENDING", "gone", proto=True),
        pg("proto-not", "PENDING", "!gone", proto=True),
        {"placement_group_id": "odd", "state": "PENDING"},
    ]
    assert unplaceable(groups, alive) == ["dead", "half", "proto"]
    assert unplaceable(groups, alive | {"gone"}) == []


def test_the_sweep_runs_for_a_while_after_each_node_loss_and_never_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every SWEEP_EVERY_S within SWEEP_FOR_S of the last loss, not before a loss nor
    after; a sweep that fails (the State API busy) is logged, and the cycle goes on."""
    calls: list[float] = []
    now = [0.0]

    def remove() -> list[str]:
        calls.append(now[0])
        if len(calls) == 2:
            raise RuntimeError("state API busy")
        return []

    monkeypatch.setattr(stale_pgs, "remove_unplaceable", remove)
    sweep = Sweep()
    for t in (0.0, 5.0, 50.0):  # no node lost yet: nothing to sweep
        now[0] = t
        sweep.after_poll(False, t)
    assert calls == []
    for t in (100.0, 104.0, 110.0, 115.0, 121.0):
        now[0] = t
        sweep.after_poll(t == 100.0, t)
    assert calls == [100.0, 110.0, 121.0]  # at most every SWEEP_EVERY_S, the raise survived
    now[0] = 100.0 + stale_pgs.SWEEP_FOR_S + 1
    sweep.after_poll(False, now[0])
    assert calls == [100.0, 110.0, 121.0]  # the window closed
