"""A private local Ray cluster (with dashboard) for tests, benchmarks and `lyra moe serve`.

WHY private ports and temp dir: several Ray clusters share this host, so every port (GCS,
dashboard, its agent, metrics, Serve's HTTP proxy) is picked free and the temp dir is our own;
the cluster is shut down through ``Cluster.shutdown`` — never ``ray stop``, which would end
every Ray process on the machine. The dashboard is required: Serve's external scaler lives
on its port.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class LocalCluster:
    address: str
    dashboard_url: str
    metrics_url: str  # Prometheus text of the node's metrics agent (ray.util.metrics, ray_ prefix)


@contextmanager
def local_cluster(
    num_cpus: int = 2,
    num_gpus: int = 8,
    object_store_mb: int = 150,
    temp_dir: str | None = None,
) -> Iterator[LocalCluster]:
    """Start a one-node cluster with fake GPUs, connect, start Serve; tear it all down."""
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from lyra_ray.client.quiet import init_ray, quiet_nodes, silenced

    quiet_nodes()
    # Ray keeps sessions under <RAY_TMPDIR>/ray and writes the "current cluster" address file
    # there too: both must be ours, or another user's ray.init() could find our cluster.
    base = temp_dir or os.environ.get("RAY_TMPDIR") or f"/tmp/ray-moe-{os.getpid()}"
    os.environ["RAY_TMPDIR"] = base
    temp_dir = os.path.join(base, "ray")
    os.makedirs(temp_dir, exist_ok=True)
    dash, metrics_port = free_port(), free_port()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": num_cpus,
            "num_gpus": num_gpus,
            "object_store_memory": object_store_mb * 1024 * 1024,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dash,
            "dashboard_agent_listen_port": free_port(),
            "metrics_export_port": metrics_port,
            "gcs_server_port": free_port(),
            "ray_client_server_port": free_port(),
            "temp_dir": temp_dir,
        },
    )
    try:
        init_ray(cluster.address)
        serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
        yield LocalCluster(
            cluster.address, f"http://127.0.0.1:{dash}", f"http://127.0.0.1:{metrics_port}/metrics"
        )
    finally:
        with silenced():
            try:
                serve.shutdown()  # type: ignore[no-untyped-call]
            except Exception:  # the cluster may already be half gone; shutdown must go on
                log.exception("serve.shutdown failed")
            ray.shutdown()
            cluster.shutdown()  # type: ignore[no-untyped-call]
