"""A run that ends on a node whose raylet is dead, before Ray declares the node dead, is
not restarted there (``Inventory.raylet_gone``, used by ``RayRuntime._ended``): found
in a whole suite under a one-core CPU hog, where a lost node's job spent its three
restarts in place and failed before the NodeDown that would have moved it. Only a
refused connection counts as gone; a timeout says nothing for sure. The live path is
``tests/chaos/test_chaos_live.py::test_a_lost_node_requeues_its_job...``."""

from __future__ import annotations

import socket

import pytest

from lyra_ray.runtime.inventory import Inventory


def test_only_a_refused_connection_means_the_raylet_is_gone() -> None:
    inv = Inventory()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        inv.raylets["alive"] = listening.getsockname()
        assert not inv.raylet_gone("alive")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        inv.raylets["dead"] = closed.getsockname()  # bound, never listening: refused
        assert inv.raylet_gone("dead")
    assert not inv.raylet_gone("never-seen")  # no address: no claim
    inv.raylets["unroutable"] = ("192.0.2.255", 9)  # no refusal (a timeout, an error)
    assert not inv.raylet_gone("unroutable", timeout_s=0.2)


def _ray_nodes(monkeypatch: pytest.MonkeyPatch, listed: list[str]) -> None:
    """``ray.nodes()`` as Ray would answer: these GPU nodes alive, with raylet ports."""
    import lyra_ray.runtime.inventory as inventory

    infos = [
        {
            "NodeID": nid,
            "Alive": True,
            "Resources": {"GPU": 2.0},
            "Labels": {"gpu-type": "k80"},
            "NodeManagerAddress": "127.0.0.1",
            "NodeManagerPort": 1000 + i,
        }
        for i, nid in enumerate(listed)
    ]
    monkeypatch.setattr(inventory.ray, "nodes", lambda: infos)


def test_a_condemned_node_leaves_the_view_once_and_stays_out_until_ray_drops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Inventory.condemn``: the runtime takes a node whose raylet refused a connection
    out of the view at once (one NodeDown, reported by the caller), instead of waiting
    for Ray's health checks; Ray listing it alive meanwhile brings no NodeUp back, and
    once Ray drops it nothing more is said of it. A node condemned twice, or never in
    the view, reports nothing."""
    from lyra_ray.model import NodeDown, NodeUp

    inv = Inventory()
    _ray_nodes(monkeypatch, ["a", "b"])
    assert sorted(e.node.id for e in inv.refresh() if isinstance(e, NodeUp)) == ["a", "b"]
    assert inv.condemn("a") is True
    assert inv.condemn("a") is False and inv.condemn("never") is False
    assert set(inv.nodes) == {"b"} and inv.gpus_by_type() == {"k80": 2}
    assert inv.refresh() == []  # Ray still lists "a": no NodeUp, no second NodeDown
    assert inv.gpus_by_type(live=True) == {"k80": 2}  # Ray's own view, less the condemned
    _ray_nodes(monkeypatch, ["b"])  # Ray declared "a" dead
    assert inv.refresh() == [] and inv.condemned == set()
    _ray_nodes(monkeypatch, ["b", "c"])  # a node that joins later is seen as ever
    assert [e.node.id for e in inv.refresh() if isinstance(e, NodeUp)] == ["c"]
    assert not any(isinstance(e, NodeDown) for e in inv.refresh())
