"""A real local multi-node Ray cluster per test module: fake V100/P100/K80 GPU nodes.

Each node gets ``num_gpus``, an ``accelerator_type:X`` resource and the labels lyra
reads (``gpu-type``, ``pool``). The dashboard is on because Ray Train only frees a
cancelled run's GPUs promptly when it runs. Ports are picked free and RAY_TMPDIR is
private so that several clusters can live on one machine; shutdown goes through
``Cluster.shutdown()`` only (never ``ray stop``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from lyra_ray.ops.embedded import EmbeddedCluster, start_embedded
from lyra_ray.ops.ports import free_port

__all__ = ["LiveCluster", "free_port", "start_cluster", "start_pool_cluster", "stop_cluster"]

DEFAULT_NODES: tuple[tuple[str, int], ...] = (("v100", 4), ("p100", 4), ("k80", 4))

LiveCluster = EmbeddedCluster


def start_cluster(nodes: Sequence[tuple[str, int]] = DEFAULT_NODES) -> LiveCluster:
    """A cluster whose workdir (its scheduler state and checkpoints) is the test's own
    temporary directory, removed by :func:`stop_cluster`: left behind, the suite's
    checkpoints piled up in /tmp (417 directories, 17 GB on one host)."""
    os.environ.setdefault("RAY_TMPDIR", "/tmp/ray-lyra-rt")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    workdir = Path(tempfile.mkdtemp(prefix="lyra-test-"))
    try:
        return start_embedded(training=nodes, workdir=workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def start_pool_cluster(gpu: str = "t4") -> LiveCluster:
    """One training server and two inference servers of 2 ``gpu`` GPUs each: the smallest
    cluster on which a server can be lent while another still serves."""
    live = start_cluster(nodes=())
    live.add_gpu_node(gpu, 2, pool="training")
    for _ in range(2):
        live.add_gpu_node(gpu, 2, pool="inference")
    live.cluster.wait_for_nodes()
    return live


def stop_cluster(live: LiveCluster) -> None:
    try:
        live.shutdown()
    finally:
        shutil.rmtree(live.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def live_cluster() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    live = start_cluster()
    try:
        yield live
    finally:
        stop_cluster(live)
