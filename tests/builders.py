"""Builders for jobs, clusters and invariant checks shared by the unit and sim tests."""

from __future__ import annotations

from typing import Any

from lyra_ray.model import JobSpec, JobStatus, Node
from lyra_ray.scheduling.core import SchedulerCore


def job(
    name: str,
    steps: float = 100.0,
    workers: int = 1,
    max_workers: int | None = None,
    arrival: float = 0.0,
    tput: dict[str, float] | None = None,
    **kw: object,
) -> JobSpec:
    return JobSpec(
        name=name,
        total_steps=steps,
        min_workers=workers,
        max_workers=max_workers or workers,
        arrival_s=arrival,
        throughput=tput or {"v100": 1.0},
        **kw,
    )  # type: ignore[arg-type]


def cluster(**types: int) -> list[Node]:
    """``cluster(v100=(nodes, gpus_per_node))`` style via ``v100=8`` = 8 one-GPU nodes."""
    return [Node(f"{g}-{i}", g, 1) for g, n in types.items() for i in range(n)]


def check_invariants(core: SchedulerCore) -> None:
    """No GPU over-allocated; each of a job's GPUs of its base type or of one of its
    ``extra`` parts (Lyra's flexible workers on another type), each part's GPUs as
    many as the part says; sizes within [min, max]; progress bounded."""
    used: dict[str, int] = {}
    pairs_seen: set[tuple[str, str]] = set()
    for j in core.jobs.values():
        assert j.steps_done <= j.spec.total_steps + 1e-6, j.id
        if j.status.terminal:
            assert j.current is None
            continue
        a = j.current
        if a is None:
            assert j.status in (JobStatus.QUEUED, JobStatus.PREEMPTED), (j.id, j.status)
            continue
        assert j.status is JobStatus.RUNNING
        assert j.spec.min_workers <= a.workers <= j.spec.max_workers, (j.id, a)
        assert sum(g for _, g in a.nodes) == a.workers, (j.id, a)
        per_type: dict[str, int] = {}
        for node_id, g in a.nodes:
            node = core.nodes[node_id]
            per_type[node.gpu_type] = per_type.get(node.gpu_type, 0) + g
            assert node.pool == "training" or node_id in core.lent, (j.id, node_id)
            if a.partner is not None:
                key = (node_id, min(j.id, a.partner))
                if key in pairs_seen:
                    continue
                pairs_seen.add(key)
            used[node_id] = used.get(node_id, 0) + g
        assert per_type == {t: w for t, w in a.parts if w}, (j.id, per_type, a)
    for node_id, g in used.items():
        assert g <= core.nodes[node_id].num_gpus, (node_id, g)


def schedule(jobs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What tells two simulated schedules apart: each job's id, finish, first start,
    preemptions and steps (a report's ``jobs`` records)."""
    return [
        (r["id"], r["finish_s"], r["first_start_s"], r["preemptions"], r["steps_done"])
        for r in jobs
    ]
