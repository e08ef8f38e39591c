"""The domain model: frozen value types shared by the core, the policies and both runtimes.

Everything here is pure data. The scheduler core is the only place that holds
*mutable* state; it hands policies a frozen :class:`ClusterSnapshot` so that a policy
cannot reach into the runtime, read a clock, or change anything behind the core's back.
Validation of user input lives in :mod:`lyra_ray.model.spec`; these types assume valid values.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from lyra_ray.model.team_bounds import TeamBounds

if TYPE_CHECKING:  # imported at first use: it is compiled for the simulator
    from lyra_ray.model.restart_cost import RestartModel

GpuType: TypeAlias = str
"""A lower-case accelerator name (``"v100"``, ``"t4"``). Kept a plain string so that a
cluster can carry any accelerator Ray knows without a code change."""

JobId: TypeAlias = str
NodeId: TypeAlias = str
Pool = Literal["training", "inference"]


@dataclass(frozen=True, slots=True)
class Node:
    """A machine with ``num_gpus`` GPUs of one type, in the training or inference pool."""

    id: NodeId
    gpu_type: GpuType
    num_gpus: int
    pool: Pool = "training"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user asks for. Fixed-size jobs have ``min_workers == max_workers``.

    ``throughput`` is steps/s *per worker* on each GPU type (scaled by ``scaling``);
    ``job_type`` instead names an entry of the throughput catalogue (Gavel's measured
    steps/s per job type, scale factor and GPU type); ``throughput_by_size`` gives the
    whole job's steps/s per GPU type and worker count (from the parallelism planner,
    for a job that describes its model). At least one of them is set.
    """

    name: str
    total_steps: float
    min_workers: int = 1
    max_workers: int = 1
    user: str = "default"
    priority_weight: float = 1.0
    job_type: str | None = None
    throughput: Mapping[GpuType, float] | None = None
    scaling: str = "linear"
    slo_s: float | None = None
    arrival_s: float = 0.0
    entrypoint: str | None = None
    config: Mapping[str, object] = field(default_factory=dict)
    throughput_by_size: Mapping[GpuType, Mapping[int, float]] | None = None
    keep_when_shared: float | None = None
    """The share (0, 1] of its speed alone the job keeps while it shares its GPUs with
    another (Gavel's space sharing), as its owner expects it; ``None``: unknown. A pair
    of two jobs that both declare one is offered to packed policies at those shares
    (else only the catalogue's job types are), and the live scheduler replaces each
    side with what it measures."""
    checkpoint_mb: float | None = None
    """The size of one checkpoint of the job (MB), as its owner states it: a restart
    writes and restores it, so it prices the job's resizes and preemptions
    (:mod:`lyra_ray.model.restart_cost`); ``None``: not stated (priced as measured)."""
    startup_s: float | None = None
    """Seconds one of its workers takes from a fresh process to its first step, restore
    excluded (imports, building the model), as its owner states it; ``None``: the
    measured warm spare's (:data:`lyra_ray.model.restart_cost.H200_WARM_SPARE_S`)."""

    @property
    def elastic(self) -> bool:
        return self.max_workers > self.min_workers

    @property
    def scale_factor(self) -> int:
        """GPUs a rigid job needs (Gavel's scale factor); elastic jobs start at ``min``."""
        return self.min_workers


class JobStatus(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({JobStatus.FINISHED, JobStatus.CANCELLED, JobStatus.FAILED})


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one job runs this round: ``workers`` GPUs of ``gpu_type``.

    ``nodes`` maps node id -> GPUs used there; empty until the placer fills it in.
    ``partner`` names the co-located job when two jobs space-share the same GPUs.
    ``extra`` holds an elastic job's flexible workers on *other* GPU types, as sorted
    ``(gpu_type, workers)`` parts: ``workers`` counts them too, so every reader of
    "how many GPUs" stays right, and ``gpu_type`` (the base's type) holds
    ``workers - sum(extra)``. Why a tuple of parts rather than a type per node: every
    policy but Lyra leaves it empty, and an empty tuple changes no equality, diff or
    saved state. ``nodes`` then lists the nodes of every part.
    """

    gpu_type: GpuType
    workers: int
    nodes: tuple[tuple[NodeId, int], ...] = ()
    partner: JobId | None = None
    extra: tuple[tuple[GpuType, int], ...] = ()

    @property
    def parts(self) -> tuple[tuple[GpuType, int], ...]:
        """``(gpu_type, workers)`` per GPU type, the base's type first."""
        if not self.extra:
            return ((self.gpu_type, self.workers),)
        return ((self.gpu_type, self.workers - sum(w for _, w in self.extra)), *self.extra)


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as policies see it: its spec plus the scheduling history they need."""

    id: JobId
    spec: JobSpec
    arrival_s: float
    status: JobStatus
    steps_done: float
    attained_service_s: float
    """GPU-seconds received so far (LAS / max-min fairness)."""
    time_received_s: Mapping[GpuType, float]
    """Wall seconds run on each GPU type (Gavel's rounds received x round length)."""
    throughput: Mapping[GpuType, float]
    """Steps/s of the job at its requested size (``min_workers``) on each GPU type."""
    current: Assignment | None
    first_start_s: float | None = None
    num_preemptions: int = 0

    @property
    def remaining_steps(self) -> float:
        return max(0.0, self.spec.total_steps - self.steps_done)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything a policy may look at, frozen at time ``now``.

    ``throughput_fn`` gives steps/s for (job id, GPU type, workers) and, for pairs,
    the two jobs' steps/s when co-located; policies call it instead of holding their
    own throughput tables, so measured throughputs reach every policy the same way.
    """

    now: float
    nodes: tuple[Node, ...]
    jobs: tuple[JobView, ...]
    throughput_model: ThroughputModel
    round_s: float = 360.0
    serving_demand: int = 0
    """Inference servers the serving side needs right now (Lyra loaning)."""
    lent_nodes: frozenset[NodeId] = frozenset()
    """Inference nodes currently lent to training."""
    entity_weights: Mapping[str, float] = field(default_factory=dict)
    """Weight of each entity (a job's ``spec.user``) for hierarchical policies; an entity
    not named weighs 1. Empty unless teams are in force: the teams wrapper
    (:mod:`lyra_ray.policies.teams`) makes each team an entity of its weight."""
    restart_model: RestartModel = field(default_factory=lambda: _measured_restarts())
    """What one restart costs each job (:mod:`lyra_ray.model.restart_cost`): the policies
    that resize or preempt weigh it against what the change gains."""
    team_bounds: TeamBounds | None = None
    """Teams' quotas as bounds on the allocation (:mod:`lyra_ray.model.team_bounds`);
    ``None`` unless the teams wrapper is in force. With it, a job's entity (for
    hierarchical policies) is its team: :meth:`entity_of`."""

    def entity_of(self, job: JobView) -> str:
        """The entity a hierarchical policy shares by: the job's team under the teams
        wrapper, else its owner (``spec.user``)."""
        b = self.team_bounds
        return job.spec.user if b is None else b.team_of.get(job.id, job.spec.user)

    def gpus_by_type(self, pool: Pool | None = "training") -> dict[GpuType, int]:
        out: dict[GpuType, int] = {}
        for n in self.nodes:
            if pool is None or n.pool == pool or (pool == "training" and n.id in self.lent_nodes):
                out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
        return out

    @property
    def gpu_types(self) -> tuple[GpuType, ...]:
        return tuple(sorted(self.gpus_by_type()))

    @property
    def active_jobs(self) -> tuple[JobView, ...]:
        return tuple(j for j in self.jobs if j.status not in _TERMINAL)

    def job(self, job_id: JobId) -> JobView:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)

    def throughput(self, job: JobView, gpu_type: GpuType, workers: int | None = None) -> float:
        """Steps/s of ``job`` with ``workers`` GPUs of ``gpu_type`` (default: its size)."""
        return self.throughput_model.throughput(job.spec, gpu_type, workers or job.spec.min_workers)


def _measured_restarts() -> RestartModel:
    """The measured restart model, for a snapshot built without one (a test's). Imported
    here, not at the top: ``lyra_ray.model.restart_cost`` is one of the simulator's
    compiled modules, which must not be imported before ``lyra simulate`` activates them
    (``lyra_ray/native.py``), and every command imports this module first."""
    from lyra_ray.model.restart_cost import RestartModel

    return RestartModel()


class ThroughputModel:
    """Steps/s of a job on a GPU type with a number of workers (and with a partner).

    The base class implements the spec-driven model (``JobSpec.throughput`` per worker,
    times a scaling curve); :mod:`lyra_ray.model.throughput` adds Gavel's measured catalogue.
    The live runtime wraps it to substitute throughputs it has measured.
    """

    def throughput(self, spec: JobSpec, gpu_type: GpuType, workers: int) -> float:
        if spec.throughput_by_size is not None:
            return spec.throughput_by_size.get(gpu_type, {}).get(workers, 0.0)
        if spec.throughput is None:
            return 0.0
        per_worker = spec.throughput.get(gpu_type, 0.0)
        return per_worker * workers

    def pair_throughput(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        """Steps/s of ``a`` and ``b`` sharing the same GPUs, or ``None`` if they cannot.
        The base knows only what the two specs declare (:meth:`declared_pair`)."""
        return self.declared_pair(a, b, gpu_type)

    def declared_pair(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        """Each side's speed alone times the share it declares it keeps beside another
        (``JobSpec.keep_when_shared``), when both declare one and have the same size (a
        pair shares one gang of GPUs, worker for worker); else ``None``."""
        ka, kb = a.keep_when_shared, b.keep_when_shared
        if ka is None or kb is None or a.min_workers != b.min_workers:
            return None
        ta = self.throughput(a, gpu_type, a.min_workers)
        tb = self.throughput(b, gpu_type, b.min_workers)
        return (ta * ka, tb * kb) if ta > 0 and tb > 0 else None

    def pair_class(self, spec: JobSpec) -> Hashable | None:
        """A key shared by every spec this model gives the same rates, alone and beside
        any partner (``None``: the spec is its own class). Policies look pair rates up
        once per class instead of once per job pair, so the key must cover everything
        the rates depend on: here the catalogue's (job type, scale factor) and the
        share the spec declares."""
        if not spec.job_type:
            return None
        return (spec.job_type, spec.min_workers, spec.keep_when_shared)

    def observe(self, spec: JobSpec, gpu_type: GpuType, workers: int, steps_per_s: float) -> None:
        """A measured rate; a model that learns online keeps it (the base ignores it)."""

    def observe_pair(
        self, spec: JobSpec, partner: JobSpec, gpu_type: GpuType, steps_per_s: float
    ) -> None:
        """``spec``'s measured rate while it shares its GPUs with ``partner`` (space
        sharing); a model that learns online keeps it (the base ignores it)."""

    def to_state(self) -> dict[str, Any]:
        """What :meth:`observe` taught the model (JSON-safe), persisted with the core so a
        restarted scheduler sees the same throughputs as the one that died."""
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, got {sorted(state)}")


# ----------------------------------------------------------------------------- allocation


@dataclass(frozen=True, slots=True)
class Allocation:
    """A policy's answer.

    ``fractions`` is Gavel's X: for a job id (or a ``"a+b"`` pair key, see
    :func:`pair_key`) the fraction of time it should spend on each GPU type; the round
    mechanism turns it into assignments. ``workers`` gives integral allocations directly
    (FIFO, Lyra's elastic sizes): job id -> (GPU type, worker count); those jobs bypass
    the round mechanism. A job in neither map is not scheduled.
    """

    fractions: Mapping[str, Mapping[GpuType, float]] = field(default_factory=dict)
    workers: Mapping[JobId, tuple[GpuType, int]] = field(default_factory=dict)
    lend: frozenset[NodeId] = frozenset()
    """Inference nodes that should be on loan to training after this step."""
    preferred_nodes: Mapping[JobId, tuple[NodeId, ...]] = field(default_factory=dict)
    """Servers to fill first (best fit among them), e.g. lent servers for an elastic job
    and training servers for a rigid one; other servers of its type only after them."""
    extra: Mapping[JobId, tuple[tuple[GpuType, int], ...]] = field(default_factory=dict)
    """Flexible workers on other GPU types (:attr:`Assignment.extra`); a job's count in
    ``workers`` includes them."""
    waiting: Mapping[JobId, tuple[str, str]] = field(default_factory=dict)
    """Why the policy gives a job nothing, where a rule of its own is the reason: ``(code,
    sentence)`` (:mod:`lyra_ray.scheduling.waiting`); other waiting jobs get a reason
    from the snapshot."""


PAIR_SEP = "+"


def pair_key(a: JobId, b: JobId) -> str:
    """The key of a space-sharing pair in :attr:`Allocation.fractions` (order-free)."""
    x, y = sorted((a, b))
    return f"{x}{PAIR_SEP}{y}"


def split_pair(key: str) -> tuple[JobId, ...]:
    return tuple(key.split(PAIR_SEP))
