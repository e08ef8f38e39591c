"""Ring all-reduce over placed jobs and GADGET-style ring-aware placement."""

import itertools

import numpy as np
import pytest

from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, Node, ThroughputModel
from lyra_ray.network.comm_profile import DEFAULT_BYTES, gradient_bytes, model_key
from lyra_ray.network.ring import RingCommModel, RingLoads, ring_links, ring_order, ring_seconds
from lyra_ray.network.topology import Topology
from lyra_ray.placement.placer import ConsolidatingPlacer
from lyra_ray.placement.ring import RingPlacer, embed, make_placer

# Two racks of four one-GPU servers, 4:1 oversubscribed: a rack's spine link carries a
# single NIC's worth (4 x 1 / 4).
NODES = [Node(f"v{i}", "v100", 1) for i in range(8)]
TOPO = Topology([n.id for n in NODES], [i // 4 for i in range(8)], 1.0, oversubscription=4.0)


def snap(nodes: list[Node] = NODES) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, tuple(nodes), (), ThroughputModel())


def test_ring_crosses_each_rack_spine_once_each_way() -> None:
    assert ring_order(["v5", "v0", "v4", "v1"], TOPO) == ["v0", "v1", "v4", "v5"]
    links = ring_links(["v0", "v1", "v4", "v5"], TOPO)
    assert links[TOPO.rack_up(0)] == 1 and links[TOPO.rack_down(0)] == 1
    assert links[TOPO.rack_up(1)] == 1 and links[TOPO.rack_down(1)] == 1
    assert all(links[TOPO.nic_up(i)] == 1 for i in (0, 1, 4, 5))
    assert ring_links(["v0", "v1"], TOPO).keys() == {
        TOPO.nic_up(0),
        TOPO.nic_down(0),
        TOPO.nic_up(1),
        TOPO.nic_down(1),
    }
    assert ring_links(["v0"], TOPO) == {}
    assert ring_seconds(4, 100.0, 2.0) == 2 * 3 / 4 * 100.0 / 2.0
    assert ring_seconds(1, 100.0, 2.0) == 0.0


def test_embed_keeps_a_ring_inside_a_rack() -> None:
    free = {"v0": 1, "v3": 1, "v4": 1, "v5": 1, "v6": 1}
    bw, neg, nodes = embed(3, free, RingLoads(TOPO))  # type: ignore[misc]
    assert sorted(n for n, _ in nodes) == ["v4", "v5", "v6"] and bw == 1.0 and neg == -3


def test_embed_avoids_loaded_nics() -> None:
    loads = RingLoads(TOPO)
    loads.add(["v4", "v5"])  # another ring on v4 and v5: half their NICs
    free = {n.id: 1 for n in NODES}
    bw, _, nodes = embed(2, free, loads)  # type: ignore[misc]
    assert bw == 1.0 and {n for n, _ in nodes} <= {"v0", "v1", "v2", "v3", "v6", "v7"}


@pytest.mark.parametrize("seed", range(12))
def test_embed_finds_the_highest_bottleneck(seed: int) -> None:
    """Against brute force over every server subset, under random existing rings."""
    rng = np.random.default_rng(seed)
    nodes = [Node(f"n{i}", "v100", 2) for i in range(6)]
    topo = Topology([n.id for n in nodes], [0, 0, 0, 1, 1, 1], 1.0, oversubscription=3.0)
    loads = RingLoads(topo)
    for _ in range(rng.integers(0, 4)):
        loads.add(list(rng.choice([n.id for n in nodes], size=2, replace=False)))
    free = {n.id: int(rng.integers(0, 3)) for n in nodes}
    need = int(rng.integers(3, 6))
    best = -1.0
    for k in range(1, 7):
        for subset in itertools.combinations(free, k):
            if sum(free[n] for n in subset) >= need and all(free[n] for n in subset):
                best = max(best, loads.bottleneck(list(subset)) if k > 1 else np.inf)
    got = embed(need, free, loads)
    if best < 0:
        assert got is None
    else:
        assert got is not None and got[0] == best
        assert sum(g for _, g in got[2]) == need
        assert all(g <= free[n] for n, g in got[2])


def test_ring_placer_beats_consolidation_across_racks() -> None:
    # v1-v3 and v5 are busy: consolidation takes free nodes by name, v0, v4, v6 (two
    # racks); the ring fits in rack 1 as v4, v6, v7 with no spine link.
    busy = {"x": Assignment("v100", 4, (("v1", 1), ("v2", 1), ("v3", 1), ("v5", 1)))}
    desired = {**busy, "j": Assignment("v100", 3)}
    cons = ConsolidatingPlacer().place(desired, snap(), busy)
    ring = RingPlacer(TOPO).place(desired, snap(), busy)
    assert {n for n, _ in cons["j"].nodes} == {"v0", "v4", "v6"}
    assert {n for n, _ in ring["j"].nodes} == {"v4", "v6", "v7"}
    assert ring["x"] == busy["x"]  # what runs stays where it runs
    used = [n for a in ring.values() for n, _ in a.nodes]
    assert len(used) == len(set(used))  # no GPU given twice


def test_make_placer_by_name() -> None:
    assert isinstance(make_placer("consolidate", None), ConsolidatingPlacer)
    assert isinstance(make_placer("ring", TOPO), RingPlacer)
    with pytest.raises(ValueError, match="placer"):
        make_placer("ring", None)
    with pytest.raises(ValueError, match="placer"):
        make_placer("random", TOPO)


def spec(job_type: str) -> JobSpec:
    return JobSpec(name="j", total_steps=10, min_workers=2, max_workers=2, job_type=job_type)


def test_comm_model_shares_the_spine() -> None:
    model = RingCommModel(TOPO, {"resnet50": 1.0})
    s = spec("ResNet-50 (batch size 32)")
    runs = {
        "a": (s, Assignment("v100", 2, (("v0", 1), ("v4", 1))), 1.0),  # crosses racks
        "b": (s, Assignment("v100", 2, (("v1", 1), ("v5", 1))), 1.0),  # crosses racks
        "c": (s, Assignment("v100", 2, (("v2", 1), ("v3", 1))), 1.0),  # inside rack 0
        "d": (s, Assignment("v100", 1, (("v7", 1),)), 1.0),  # one server
    }
    out = model.rates(runs)
    # a and b share both spine links (capacity 1): 1/2 each; ring time 2*(1/2)*1/(1/2).
    assert out["a"] == pytest.approx(1 / (1 + 2.0)) and out["b"] == out["a"]
    assert out["c"] == pytest.approx(1 / (1 + 1.0))
    assert out["d"] == 1.0


def test_gradient_bytes_by_model() -> None:
    assert model_key("ResNet-50 (batch size 32)") == "resnet50"
    assert model_key("LM (batch size 80)") == "lm"
    assert gradient_bytes(spec("ResNet-18 (batch size 16)")) == pytest.approx(11.7e6 * 4)
    assert gradient_bytes(spec("unknown model")) == DEFAULT_BYTES
