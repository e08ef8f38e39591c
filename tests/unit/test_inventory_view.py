"""The job desk's GPU count never takes the loop's node events (#47).

``benchmarks/resize_phases.py`` failed "timed out waiting for grown to 4" now and then
(on a fresh clone, and once here): a submit that came before the scheduler loop's first
poll asked for the cluster's GPUs, and that call refreshed the inventory, so the
NodeUp went to the desk and was dropped; the core never heard of the node and the job
queued forever (its saved state: ``core.nodes == []``, the job ``queued``).
"""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray import model as m
from lyra_ray.runtime.inventory import Inventory

NODE = {
    "NodeID": "n1",
    "Alive": True,
    "Resources": {"GPU": 4.0, "accelerator_type:V100": 1.0},
    "Labels": {"gpu-type": "v100", "pool": "training"},
}


@pytest.fixture
def ray_nodes(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    monkeypatch.setattr("lyra_ray.runtime.inventory.ray.nodes", lambda: list(nodes))
    return nodes


def test_counting_gpus_before_the_first_poll_leaves_the_node_up_to_the_loop(
    ray_nodes: list[dict[str, Any]],
) -> None:
    inv = Inventory()
    ray_nodes.append(NODE)
    assert inv.gpus_now() == {"v100": 4}  # the desk, before the loop's first poll
    assert inv.refresh() == [m.NodeUp(m.Node("n1", "v100", 4))]  # still the loop's
    assert inv.gpus_now() == {"v100": 4} and inv.refresh() == []


def test_a_node_gone_since_the_last_poll_is_still_the_loops_to_report(
    ray_nodes: list[dict[str, Any]],
) -> None:
    inv = Inventory()
    ray_nodes.append(NODE)
    inv.refresh()
    ray_nodes.clear()
    assert inv.gpus_now() == {"v100": 4} and inv.gpus_now(live=True) == {}
    assert inv.refresh() == [m.NodeDown("n1")]
