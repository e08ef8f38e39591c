"""What starts one run of a job: the request, its workers' label selectors, its name.

Plain data shared by the scheduler's side (:mod:`lyra_ray.runtime.runs`) and the
processes that carry a run out (a job's gang, :mod:`lyra_ray.runtime.gang`, or the Ray
Train driver actor), kept apart so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lyra_ray.contract.labels import GPU_TYPE_LABEL, NODE_ID_LABEL

EXECUTORS = ("warm", "ray_train")
"""How runs are carried out: ``warm``, a job's gang of warm workers that outlive its
runs (:mod:`lyra_ray.runtime.gang`); ``ray_train``, one ``TorchTrainer.fit()`` per run
(a new Ray Train controller and worker group each time: the path before #47, kept as
the resize benchmark's baseline)."""


def run_name(job_id: str) -> str:
    """The stable Ray Train ``RunConfig.name`` of a job (same across reruns)."""
    return f"lyra-{job_id}"


@dataclass(frozen=True)
class RunRequest:
    """Everything a run needs: plain data, so it pickles across processes."""

    job_id: str
    generation: int
    entrypoint: str
    total_steps: int
    config: Mapping[str, Any]
    workers: int
    label_selectors: tuple[Mapping[str, str], ...]
    storage_path: str
    runtime_env: Mapping[str, Any] | None = None
    """The job's uploaded runtime env (URIs only), or None for the cluster's own."""
    backend: str = "auto"
    """``auto`` (NCCL on CUDA workers, else gloo), ``gloo`` or ``nccl``."""
    gpu_per_worker: float = 1.0
    """1, or 0.5 for each job of a space-sharing pair (Gavel's packed policies): both
    runs' workers then hold half of the same GPUs, pinned to the same nodes."""
    executor: str = "warm"
    """One of :data:`EXECUTORS`."""


def worker_selectors(
    gpu_label: str,
    nodes: Sequence[tuple[str, int]],
    workers: int,
    node_labels: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], ...]:
    """One label selector per worker: its node (when placed) and always its GPU type.

    ``node_labels`` gives each node's own GPU-type label. A job whose flexible workers sit
    on servers of another type (``Assignment.extra``, Lyra) spans nodes of two types, so
    each worker must carry its own node's label; without the map every placed worker
    carries ``gpu_label`` (the base's type), which a node of another type never matches.
    """
    out: list[dict[str, str]] = []
    for node_id, gpus in nodes:
        label = node_labels.get(node_id, gpu_label) if node_labels else gpu_label
        out += [{GPU_TYPE_LABEL: label, NODE_ID_LABEL: node_id}] * gpus
    while len(out) < workers:
        out.append({GPU_TYPE_LABEL: gpu_label})
    return tuple(out[:workers])
