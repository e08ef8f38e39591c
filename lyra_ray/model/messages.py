"""What a scheduling cycle says and hears: actions for a runtime to carry out, events a
runtime reports, and the :class:`Decision` of one cycle (re-exported by
:mod:`lyra_ray.model`). Kept apart from :mod:`lyra_ray.model.types` (jobs, nodes,
snapshots, allocations): the vocabulary between the core and its two runtimes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from lyra_ray.model.types import Assignment, JobId, JobSpec, Node, NodeId

# ----------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Launch:
    """Start (or resume from its latest checkpoint) ``job_id`` on ``assignment``."""

    job_id: JobId
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class Preempt:
    """Checkpoint and stop ``job_id``, releasing its GPUs; it stays queued."""

    job_id: JobId


@dataclass(frozen=True, slots=True)
class Resize:
    """Checkpoint ``job_id`` and restart it on a new assignment (other size or nodes)."""

    job_id: JobId
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class Finish:
    """``job_id`` has all its steps (or was cancelled): release whatever it holds."""

    job_id: JobId


@dataclass(frozen=True, slots=True)
class Lend:
    """Take inference node ``node_id`` from serving and add it to the training pool."""

    node_id: NodeId


@dataclass(frozen=True, slots=True)
class Reclaim:
    """Give lent node ``node_id`` back to serving (its training workers already moved)."""

    node_id: NodeId


@dataclass(frozen=True, slots=True)
class ScaleServe:
    """Set the number of inference replicas (servers) serving uses."""

    replicas: int


Action: TypeAlias = Launch | Preempt | Resize | Finish | Lend | Reclaim | ScaleServe


# ----------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class JobSubmitted:
    job_id: JobId
    spec: JobSpec


@dataclass(frozen=True, slots=True)
class JobCancelled:
    job_id: JobId


@dataclass(frozen=True, slots=True)
class JobProgress:
    """Absolute steps done by ``job_id`` (monotone); ``steps_per_s`` if measured."""

    job_id: JobId
    steps_done: float
    steps_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class JobsProgress:
    """Absolute steps done by many jobs at once (monotone per job, nothing measured).

    The simulator reports every running job after every time jump; one event per job
    would cost more to build and fold than the rest of the step's bookkeeping.
    """

    steps_done: Mapping[JobId, float]


@dataclass(frozen=True, slots=True)
class JobCompleted:
    job_id: JobId
    steps_done: float


@dataclass(frozen=True, slots=True)
class JobFailed:
    job_id: JobId
    reason: str


@dataclass(frozen=True, slots=True)
class JobStopped:
    """A preempted or resized run has released its GPUs (possibly with progress)."""

    job_id: JobId
    steps_done: float


@dataclass(frozen=True, slots=True)
class RestartMeasured:
    """The live runtime timed a restart of ``job_id`` (its ``last_restart`` record):
    seconds per phase (``stop_signal_s``, ``checkpoint_s``, ``relaunch_s``,
    ``workers_up_s``, ``first_step_s``; those it reached). The core's restart model
    prices the job's next resizes by them (:mod:`lyra_ray.model.restart_cost`)."""

    job_id: JobId
    phases: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class NodeUp:
    node: Node


@dataclass(frozen=True, slots=True)
class NodeDown:
    node_id: NodeId


@dataclass(frozen=True, slots=True)
class ServingDemand:
    """Inference needs ``servers`` servers now."""

    servers: int


Event: TypeAlias = (
    JobSubmitted
    | JobCancelled
    | JobProgress
    | JobsProgress
    | JobCompleted
    | JobFailed
    | JobStopped
    | RestartMeasured
    | NodeUp
    | NodeDown
    | ServingDemand
)


@dataclass(frozen=True, slots=True)
class Decision:
    """What one scheduling cycle decided: the actions to carry out, in order, and the
    time at which the core wants to be stepped again even if no event arrives.

    ``next_wakeup`` is how a round-based policy's round boundaries reach a driver: no
    runtime keeps a round clock of its own, so the simulator and the live scheduler
    follow one tick rule. ``None`` means "only an event can change anything".
    """

    actions: tuple[Action, ...]
    next_wakeup: float | None
