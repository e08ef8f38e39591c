"""A real local multi-node Ray cluster per test module: fake V100/P100/K80 GPU nodes.

Each node gets ``num_gpus``, an ``accelerator_type:X`` resource and the labels lyra
reads (``gpu-type``, ``pool``). The dashboard is on because Ray Train only frees a
cancelled run's GPUs promptly when it runs. Ports are picked free and RAY_TMPDIR is
private so that several clusters can live on one machine; shutdown goes through
``Cluster.shutdown()`` only (never ``ray stop``).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NODES: tuple[tuple[str, int], ...] = (("v100", 4), ("p100", 4), ("k80", 4))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveCluster:
    cluster: Any
    address: str
    dashboard_url: str
    workdir: Path
    nodes: dict[str, Any] = field(default_factory=dict)
    """node id -> the cluster_utils node handle (for remove_node)."""

    def add_gpu_node(self, gpu: str, gpus: int, pool: str = "training") -> str:
        node = self.cluster.add_node(
            num_cpus=2,
            num_gpus=gpus,
            object_store_memory=80 * 2**20,
            resources={f"accelerator_type:{gpu.upper()}": 1},
            labels={"gpu-type": gpu, "pool": pool},
            dashboard_agent_listen_port=free_port(),
        )
        self.nodes[node.node_id] = node
        return str(node.node_id)

    def remove(self, node_id: str) -> None:
        self.cluster.remove_node(self.nodes.pop(node_id))


def start_cluster(nodes: Sequence[tuple[str, int]] = DEFAULT_NODES) -> LiveCluster:
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_TMPDIR", "/tmp/ray-lyra-rt")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    dash = free_port()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "num_gpus": 0,
            "object_store_memory": 100 * 2**20,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
            "dashboard_agent_listen_port": free_port(),
            "labels": {"pool": "head"},
        },
    )
    live = LiveCluster(
        cluster, cluster.address, f"http://127.0.0.1:{dash}", Path(tempfile.mkdtemp("-lyra"))
    )
    for gpu, count in nodes:
        live.add_gpu_node(gpu, count)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    return live


def stop_cluster(live: LiveCluster) -> None:
    import ray

    ray.shutdown()
    live.cluster.shutdown()


@pytest.fixture(scope="module")
def live_cluster() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    live = start_cluster()
    try:
        yield live
    finally:
        stop_cluster(live)
