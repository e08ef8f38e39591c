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


def _ray_nodes(
    monkeypatch: pytest.MonkeyPatch, listed: list[str], ports: dict[str, int] | None = None
) -> None:
    """``ray.nodes()`` as Ray would answer: these GPU nodes alive, with raylet ports."""
    import lyra_ray.runtime.inventory as inventory

    infos = [
        {
            "NodeID": nid,
            "Alive": True,
            "Resources": {"GPU": 2.0},
            "Labels": {"gpu-type": "k80"},
            "NodeManagerAddress": "127.0.0.1",
            "NodeManagerPort": (ports or {}).get(nid, 1000 + i),
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


def _knocked(inv: Inventory) -> list[object]:
    """A refresh that knocks at once, its knocks waited for (they run on threads, and
    the refresh after reads their answers)."""
    inv._swept = float("-inf")
    events: list[object] = list(inv.refresh())
    for fut in list(inv._probes.values()):
        fut.result(timeout=5)
    return events


def test_a_raylet_that_listened_and_now_refuses_takes_its_node_down_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Inventory._sweep``: every node's raylet is knocked on; a node whose raylet
    accepted a knock and then refuses one leaves the view (one NodeDown) without a run
    ending there and before Ray's health checks declare it dead: a lost inference
    server's replacement no longer waits for them. A node that refused from the first
    knock (a firewall that rejects, say) proves nothing and stays."""
    from lyra_ray.model import NodeDown

    with socket.socket() as raylet, socket.socket() as never:
        raylet.bind(("127.0.0.1", 0))
        raylet.listen()
        never.bind(("127.0.0.1", 0))  # bound, never listening: refused from the first
        ports = {"lost": raylet.getsockname()[1], "walled": never.getsockname()[1]}
        _ray_nodes(monkeypatch, ["lost", "walled"], ports)
        inv = Inventory(sweep_s=3600.0)
        _knocked(inv)  # the nodes up, their raylets knocked on
        assert _knocked(inv) == [] and inv.reachable == {"lost"}
        raylet.close()  # the raylet gone; Ray still lists the node alive
        assert _knocked(inv) == []  # this refresh harvests the first knock's answer...
        downs = [e for e in _knocked(inv) if isinstance(e, NodeDown)]  # ...then the refusal
        assert [e.node_id for e in downs] == ["lost"]
        assert set(inv.nodes) == {"walled"}
        assert _knocked(inv) == []  # once
        assert "walled" in inv.nodes and "walled" not in inv.reachable


def test_without_sweeps_nothing_is_knocked(monkeypatch: pytest.MonkeyPatch) -> None:
    _ray_nodes(monkeypatch, ["a"])
    inv = Inventory(sweep_s=0)
    inv.refresh()
    inv.refresh()
    assert inv._probes == {} and inv._pool is None
