"""Synthetic snapshots for Gavel's policies: the unit tests' inputs and policy_solve's fallback.

Test code, kept out of ``policies/``: nothing the scheduler runs needs them.

``TableThroughputs`` is the smallest :class:`ThroughputModel`: steps/s per job name and
GPU type, plus optional pair throughputs. ``random_snapshot`` draws a cluster like the
benchmark's (three types, n/4 GPUs each); with a Gavel catalogue it draws real job
types the way Gavel's generator does (uniform over types, scale factors 1/2/4/8).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from lyra_ray.model import (
    ClusterSnapshot,
    GpuType,
    JobSpec,
    JobStatus,
    JobView,
    Node,
    ThroughputModel,
)

TYPES: tuple[GpuType, ...] = ("k80", "p100", "v100")


class TableThroughputs(ThroughputModel):
    def __init__(
        self,
        alone: Mapping[str, Mapping[GpuType, float]],
        pairs: Mapping[tuple[str, str, GpuType], tuple[float, float]] | None = None,
    ) -> None:
        self.alone = alone
        self.pairs = dict(pairs or {})

    def __repr__(self) -> str:  # a failing property test prints the whole instance
        return f"TableThroughputs({dict(self.alone)!r}, {self.pairs!r})"

    def throughput(self, spec: JobSpec, gpu_type: GpuType, workers: int) -> float:
        return float(self.alone.get(spec.name, {}).get(gpu_type, 0.0))

    def pair_throughput(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        if (a.name, b.name, gpu_type) in self.pairs:
            return self.pairs[(a.name, b.name, gpu_type)]
        if (b.name, a.name, gpu_type) in self.pairs:
            x, y = self.pairs[(b.name, a.name, gpu_type)]
            return (y, x)
        return None


def job(
    jid: str,
    total_steps: float = 1000.0,
    sf: int = 1,
    arrival: float = 0.0,
    weight: float = 1.0,
    user: str = "default",
    steps_done: float = 0.0,
    slo_s: float | None = None,
    job_type: str | None = None,
    time_received: Mapping[GpuType, float] | None = None,
) -> JobView:
    spec = JobSpec(
        name=jid,
        total_steps=total_steps,
        min_workers=sf,
        max_workers=sf,
        user=user,
        priority_weight=weight,
        slo_s=slo_s,
        arrival_s=arrival,
        job_type=job_type,
    )
    return JobView(
        id=jid,
        spec=spec,
        arrival_s=arrival,
        status=JobStatus.QUEUED,
        steps_done=steps_done,
        attained_service_s=0.0,
        time_received_s=dict(time_received or {}),
        throughput={},
        current=None,
    )


def snapshot(
    jobs: Sequence[JobView],
    gpus: Mapping[GpuType, int],
    model: ThroughputModel,
    now: float = 0.0,
    round_s: float = 360.0,
) -> ClusterSnapshot:
    nodes = tuple(Node(id=f"{g}-0", gpu_type=g, num_gpus=c) for g, c in gpus.items() if c > 0)
    return ClusterSnapshot(
        now=now, nodes=nodes, jobs=tuple(jobs), throughput_model=model, round_s=round_s
    )


def random_snapshot(
    n: int,
    seed: int = 0,
    catalogue: ThroughputModel | None = None,
    job_types: Sequence[str] = (),
    users: int = 8,
) -> ClusterSnapshot:
    """n jobs on k80/p100/v100 with max(1, n // 4) GPUs each.

    Without a catalogue, throughputs are drawn per job (v100 >= p100 >= k80 mostly);
    with one, each job gets a random ``job_types`` entry and scale factor 1/2/4/8.
    """
    rng = random.Random(seed)
    jobs: list[JobView] = []
    table: dict[str, dict[GpuType, float]] = {}
    for i in range(n):
        jid = str(i)
        sf = rng.choice((1, 1, 1, 2, 4)) if catalogue is None else rng.choice((1, 1, 2, 4, 8))
        jt = rng.choice(list(job_types)) if catalogue is not None else None
        base = rng.uniform(0.2, 2.0)
        table[jid] = {
            "k80": base,
            "p100": base * rng.uniform(1.0, 3.5),
            "v100": base * rng.uniform(1.5, 6.0),
        }
        jobs.append(
            job(
                jid,
                total_steps=rng.uniform(1e3, 1e6),
                sf=sf,
                arrival=rng.uniform(0, 3600),
                weight=rng.choice((1.0, 1.0, 2.0)),
                user=f"u{rng.randrange(users)}",
                job_type=jt,
            )
        )
    model: ThroughputModel = catalogue if catalogue is not None else TableThroughputs(table)
    per = max(1, n // 4)
    return snapshot(jobs, dict.fromkeys(TYPES, per), model, now=3600.0)
