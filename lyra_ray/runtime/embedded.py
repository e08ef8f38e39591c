"""An embedded local Ray cluster with fake heterogeneous GPU nodes, in this process.

For benchmarks and demos that need a training pool and an inference pool on one host
without the lasting ``ray start`` processes of ``lyra up --local``. Every node carries
the labels lyra reads (``gpu-type``, ``pool``) and an ``accelerator_type:X`` resource;
the dashboard runs (Ray Train frees a stopped run's GPUs promptly only with it); every
port is picked free and the temp dir is private, so that several clusters can share
the host; shutdown goes through ``Cluster.shutdown()``, never ``ray stop``.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class EmbeddedCluster:
    address: str
    dashboard_url: str
    workdir: Path
    cluster: Any


@contextmanager
def embedded_cluster(
    training: Sequence[tuple[str, int]],
    inference: Sequence[tuple[str, int]] = (),
    cpus_per_node: int = 2,
) -> Iterator[EmbeddedCluster]:
    """Nodes as ``(gpu type, GPUs)``; yields once every node is up and connected."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-embedded-{os.getuid()}")
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
    try:
        nodes = [(g, n, "training") for g, n in training] + [
            (g, n, "inference") for g, n in inference
        ]
        for gpu, gpus, pool in nodes:
            cluster.add_node(
                num_cpus=cpus_per_node,
                num_gpus=gpus,
                object_store_memory=80 * 2**20,
                resources={f"accelerator_type:{gpu.upper()}": 1},
                labels={"gpu-type": gpu, "pool": pool},
                dashboard_agent_listen_port=free_port(),
            )
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
        cluster.wait_for_nodes()
        yield EmbeddedCluster(
            cluster.address,
            f"http://127.0.0.1:{dash}",
            Path(tempfile.mkdtemp(prefix="lyra-embedded-")),
            cluster,
        )
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
