"""Communication-aware placement in the trace simulator: a job's rate depends on its
ring all-reduce through an oversubscribed fabric, so placement shows up in JCT."""

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from lyra_ray.cli import main
from lyra_ray.model import Assignment, ClusterSnapshot, JobId, JobSpec, NodeId, ThroughputModel
from lyra_ray.model.spec import parse_cluster
from lyra_ray.network.config import NetworkSpec, topology_for
from lyra_ray.network.ring import RingCommModel
from lyra_ray.placement.placer import ConsolidatingPlacer
from lyra_ray.placement.ring import RingPlacer, make_placer
from lyra_ray.policies.base import get_policy
from lyra_ray.sim.simulator import SimResult, Simulator

NODES = parse_cluster("v100=16", 1)  # v100-0 .. v100-15, one GPU each
TOPO = topology_for(NODES, NetworkSpec(servers_per_rack=4, nic_gbps=10, oversubscription=4))


def jobs() -> list[JobSpec]:
    """Four-GPU ResNet-50 jobs (102 MB of gradients) arriving every 10 minutes, two
    single-GPU jobs among them to fragment the cluster."""
    out = []
    for i in range(12):
        workers = 1 if i % 5 == 2 else 4
        out.append(
            JobSpec(
                name=f"j{i}",
                total_steps=20_000,
                min_workers=workers,
                max_workers=workers,
                throughput={"v100": 4.0},
                arrival_s=600.0 * i,
                config={"job_type": "resnet50"},
            )
        )
    return out


class Recording:
    """A placer wrapper that remembers where each job was first placed."""

    def __init__(self, inner: ConsolidatingPlacer | RingPlacer) -> None:
        self.inner = inner
        self.first: dict[JobId, tuple[tuple[NodeId, int], ...]] = {}

    def place(
        self,
        desired: Mapping[JobId, Assignment],
        snap: ClusterSnapshot,
        previous: Mapping[JobId, Assignment],
        preferred: Mapping[JobId, tuple[NodeId, ...]] | None = None,
    ) -> dict[JobId, Assignment]:
        out = self.inner.place(desired, snap, previous, preferred)
        for j, a in out.items():
            self.first.setdefault(j, a.nodes)
        return out

    def cross_rack(self) -> int:
        racks = [{TOPO.rack_of[TOPO.server(n)] for n, _ in nodes} for nodes in self.first.values()]
        return sum(len(r) > 1 for r in racks)


def run(placer: str, network: bool = True) -> tuple[SimResult, Recording]:
    rec = Recording(make_placer(placer, TOPO))
    sim = Simulator(
        NODES,
        get_policy("fifo_nonpreemptive"),
        ThroughputModel(),
        placer=rec,
        network=RingCommModel(TOPO) if network else None,
    )
    return sim.run(jobs()), rec


def test_ring_placement_shortens_jct_on_an_oversubscribed_fabric() -> None:
    (cons, cons_at), (ring, ring_at) = run("consolidate"), run("ring")
    assert cons.summary["completed_jobs"] == ring.summary["completed_jobs"] == 12
    assert ring_at.cross_rack() < cons_at.cross_rack()
    assert ring.summary["avg_jct_s"] < cons.summary["avg_jct_s"]


def test_free_communication_ignores_placement() -> None:
    """Without the network model both placers give identical JCTs (only where jobs
    run differs), and repeated runs are deterministic."""
    (a, _), (b, _) = run("consolidate", network=False), run("ring", network=False)
    assert [r["jct_s"] for r in a.jobs] == [r["jct_s"] for r in b.jobs]
    assert run("ring")[0].jobs == run("ring")[0].jobs


def test_cli_chooses_the_placer_and_network_by_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = Path(__file__).resolve().parents[2] / "lyra_ray" / "data" / "demo_jobs.yaml"
    base = ["simulate", "--trace", str(demo), "--cluster", "v100=8,p100=8,k80=16", "--quiet"]
    net = ["--network", "servers_per_rack=2,nic_gbps=10,oversubscription=4"]
    out = tmp_path / "r.json"
    assert main([*base, *net, "--placer", "ring", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["meta"]["placer"] == "ring" and report["completed_jobs"] == 40
    assert main([*base, "--placer", "ring"]) == 2  # ring needs a topology
    assert "--placer" in capsys.readouterr().err
    assert main([*base, "--network", "racks=2"]) == 2
    assert "--network" in capsys.readouterr().err
