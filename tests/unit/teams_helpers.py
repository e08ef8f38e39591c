"""Builders for the teams tests: jobs of a team on a one-type cluster."""

from __future__ import annotations

from collections.abc import Sequence

from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.throughput import catalogue_throughputs
from lyra_ray.model.types import ThroughputModel


def job(
    name: str,
    user: str,
    lo: int,
    hi: int | None = None,
    *,
    running: int = 0,
    started: float | None = None,
    arrival: float = 0.0,
    gpu: str = "v100",
    job_type: str | None = None,
) -> JobView:
    spec = JobSpec(
        name=name,
        total_steps=1e6,
        min_workers=lo,
        max_workers=hi or lo,
        user=user,
        job_type=job_type,
        throughput=None if job_type else {"v100": 2.0, "k80": 1.0},
        arrival_s=arrival,
    )
    return JobView(
        id=name,
        spec=spec,
        arrival_s=arrival,
        status=JobStatus.RUNNING if running else JobStatus.QUEUED,
        steps_done=0.0,
        attained_service_s=0.0,
        time_received_s={},
        throughput={"v100": 2.0 * lo, "k80": 1.0 * lo},
        current=Assignment(gpu, running) if running else None,
        first_start_s=(started if started is not None else arrival) if running else None,
    )


def cluster(
    jobs: Sequence[JobView],
    v100: int = 8,
    k80: int = 0,
    model: ThroughputModel | None = None,
    now: float = 100.0,
) -> ClusterSnapshot:
    nodes = [Node(f"v{i}", "v100", 1) for i in range(v100)]
    nodes += [Node(f"k{i}", "k80", 1) for i in range(k80)]
    return ClusterSnapshot(
        now=now,
        nodes=tuple(nodes),
        jobs=tuple(jobs),
        throughput_model=model or ThroughputModel(),
    )


def catalogue() -> ThroughputModel:
    return catalogue_throughputs()
