"""The two-tier fabric: paths, oversubscribed spine links, and the --network config."""

import pytest

from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.network.config import NetworkSpec, parse_network, topology_for
from lyra_ray.network.topology import Topology, gbps


def test_paths_by_locality() -> None:
    t = Topology.racks(4, servers_per_rack=2, nic_bps=100.0, oversubscription=4.0)
    assert t.path("s0", "s0") == (t.local(0),)
    assert t.path("s0", "s1") == (t.nic_up(0), t.nic_down(1))
    assert t.path("s0", "s3") == (t.nic_up(0), t.rack_up(0), t.rack_down(1), t.nic_down(3))
    assert [t.link_name(x) for x in t.path("s0", "s3")] == [
        "up:s0",
        "rack_up:0",
        "rack_down:1",
        "down:s3",
    ]


def test_spine_capacity_is_rack_nics_over_oversubscription() -> None:
    t = Topology.racks(5, servers_per_rack=2, nic_bps=gbps(100), oversubscription=4.0)
    assert t.num_racks == 3  # the last rack holds one server
    assert t.capacity[t.rack_up(0)] == pytest.approx(2 * gbps(100) / 4)
    assert t.capacity[t.rack_down(2)] == pytest.approx(gbps(100) / 4)
    assert gbps(8) == 1e9


def test_bad_topology_names_the_field() -> None:
    with pytest.raises(ValueError, match="servers"):
        Topology(["a", "a"], [0, 0], 1.0)
    with pytest.raises(ValueError, match="rack_of"):
        Topology(["a", "b"], [0], 1.0)
    with pytest.raises(ValueError, match="nic_bps"):
        Topology(["a"], [0], 0.0)
    with pytest.raises(ValueError, match="oversubscription"):
        Topology(["a"], [0], 1.0, oversubscription=0)
    with pytest.raises(ValueError, match="servers_per_rack"):
        Topology.racks(2, 0, 1.0)
    with pytest.raises(ValueError, match="server"):
        Topology(["a"], [0], 1.0).path("a", "zz")


def test_network_config_racks_hold_one_gpu_type() -> None:
    nodes = [Node(f"v{i}", "v100", 4) for i in range(3)] + [Node("k0", "k80", 4)]
    t = topology_for(nodes, NetworkSpec(servers_per_rack=2, nic_gbps=25, oversubscription=2))
    assert t.rack_of == (0, 0, 1, 2)
    assert t.capacity[t.nic_up(0)] == gbps(25)
    spec = parse_network("servers_per_rack=4, nic_gbps=100,oversubscription=3")
    assert spec == NetworkSpec(4, 100.0, 3.0)
    for bad, field in [("racks=4", "racks=4"), ("nic_gbps=x", "nic_gbps"), ("nic_gbps=0", "nic")]:
        with pytest.raises(InputError, match=field):
            parse_network(bad)
