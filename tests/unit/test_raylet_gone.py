"""A run that ends on a node whose raylet is dead, before Ray declares the node dead, is
not restarted there (``Inventory.raylet_gone``, used by ``RayRuntime._ended``): found
in a whole suite under a one-core CPU hog, where a lost node's job spent its three
restarts in place and failed before the NodeDown that would have moved it. Only a
refused connection counts as gone; a timeout says nothing for sure. The live path is
``tests/chaos/test_chaos_live.py::test_a_lost_node_requeues_its_job...``."""

from __future__ import annotations

import socket

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
