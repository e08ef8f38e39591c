"""The core's mutable per-job record and its (JSON-safe) serialisation.

Only :class:`lyra_ray.scheduling.core.SchedulerCore` mutates these. They serialise to plain dicts so
that the live runtime can persist the core after every change and a restarted scheduler
resumes with nothing lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from typing import Any, cast

from lyra_ray import model as m
from lyra_ray.model import Assignment, GpuType, JobId, JobSpec, JobStatus, JobView


@dataclass(slots=True)
class JobState:
    id: JobId
    spec: JobSpec
    arrival_s: float
    status: JobStatus = JobStatus.QUEUED
    steps_done: float = 0.0
    attained_service_s: float = 0.0
    time_received_s: dict[GpuType, float] = field(default_factory=dict)
    first_start_s: float | None = None
    finish_s: float | None = None
    num_preemptions: int = 0
    num_resizes: int = 0
    reclaim_preemptions: int = 0
    current: Assignment | None = None
    launched_s: float | None = None
    """When the current assignment was launched or resized (the minimum lease counts from
    its first progress, or from here while the run is still starting)."""
    lease_from_s: float | None = None
    launch_steps: float = 0.0
    throughput: dict[GpuType, float] = field(default_factory=dict)
    _view: JobView | None = None

    def view(self) -> JobView:
        """A frozen view for policies, rebuilt only when something in it changed.

        Queued jobs dominate a busy cluster and do not change between cycles, so the cache
        saves most of the snapshot cost. The check compares against the cached view's own
        fields (no key tuple to build), and ``time_received_s`` moves only together with
        ``attained_service_s`` (both in the core's accounting), so it needs no compare.
        """
        v = self._view
        if (
            v is not None
            and v.steps_done == self.steps_done
            and v.attained_service_s == self.attained_service_s
            and v.status is self.status
            and v.throughput is self.throughput
            and (v.current is self.current or v.current == self.current)
            and v.num_preemptions == self.num_preemptions
            and v.first_start_s == self.first_start_s
        ):
            return v
        if _FAST_VIEW:
            v = _NEW(JobView)
            _S_ID(v, self.id)
            _S_SPEC(v, self.spec)
            _S_ARRIVAL(v, self.arrival_s)
            _S_STATUS(v, self.status)
            _S_STEPS(v, self.steps_done)
            _S_SERVICE(v, self.attained_service_s)
            _S_RECEIVED(v, dict(self.time_received_s))
            _S_THROUGHPUT(v, self.throughput)
            _S_CURRENT(v, self.current)
            _S_FIRST(v, self.first_start_s)
            _S_PREEMPTIONS(v, self.num_preemptions)
        else:  # pragma: no cover - JobView lost its slots: the plain constructor
            v = JobView(
                self.id,
                self.spec,
                self.arrival_s,
                self.status,
                self.steps_done,
                self.attained_service_s,
                dict(self.time_received_s),
                self.throughput,
                self.current,
                self.first_start_s,
                self.num_preemptions,
            )
        self._view = v
        return v


# Running jobs get a new view every round, and a frozen dataclass's ``__init__`` pays
# ``object.__setattr__`` per field; writing the slots through their descriptors skips
# that indirection, which matters on this hot path. Used only while JobView's slots are
# exactly the fields below, in this order.
_VIEW_FIELDS = (
    "id",
    "spec",
    "arrival_s",
    "status",
    "steps_done",
    "attained_service_s",
    "time_received_s",
    "throughput",
    "current",
    "first_start_s",
    "num_preemptions",
)
_FAST_VIEW = (
    tuple(getattr(JobView, "__slots__", ())) == _VIEW_FIELDS
    and tuple(f.name for f in fields(JobView)) == _VIEW_FIELDS
)
_NEW = object.__new__
_Setter = Callable[[JobView, Any], None]


def _setter(name: str) -> _Setter:
    if not _FAST_VIEW:
        return lambda view, value: None
    return cast(_Setter, getattr(JobView, name).__set__)


(
    _S_ID,
    _S_SPEC,
    _S_ARRIVAL,
    _S_STATUS,
    _S_STEPS,
    _S_SERVICE,
    _S_RECEIVED,
    _S_THROUGHPUT,
    _S_CURRENT,
    _S_FIRST,
    _S_PREEMPTIONS,
) = (_setter(f) for f in _VIEW_FIELDS)


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    d = asdict(spec)
    d["throughput"] = dict(spec.throughput) if spec.throughput is not None else None
    d["config"] = dict(spec.config)
    return d


def spec_from_dict(d: dict[str, Any]) -> JobSpec:
    by_size = d.get("throughput_by_size")
    if by_size is not None:  # JSON turned the worker counts into strings
        rows = {g: {int(n): float(v) for n, v in row.items()} for g, row in by_size.items()}
        d = {**d, "throughput_by_size": rows}
    return JobSpec(**d)


def allocation_to_dict(a: m.Allocation) -> dict[str, Any]:
    """The policy's last answer, JSON-safe: it stays in force until the next solve, so
    a restarted core needs it to decide as the one that died."""
    out: dict[str, Any] = {
        "fractions": {k: dict(v) for k, v in sorted(a.fractions.items())},
        "workers": {k: [g, n] for k, (g, n) in sorted(a.workers.items())},
        "lend": sorted(a.lend),
        "preferred_nodes": {k: list(v) for k, v in sorted(a.preferred_nodes.items())},
    }
    if a.extra:  # written only when used, so states saved before it read back the same
        out["extra"] = {k: _parts_out(v) for k, v in sorted(a.extra.items())}
    if a.waiting:  # likewise: a policy's own reasons for the jobs it leaves out
        out["waiting"] = {k: list(v) for k, v in sorted(a.waiting.items())}
    return out


def allocation_from_dict(d: Mapping[str, Any]) -> m.Allocation:
    return m.Allocation(
        fractions={k: {g: float(x) for g, x in v.items()} for k, v in d["fractions"].items()},
        workers={k: (str(g), int(n)) for k, (g, n) in d["workers"].items()},
        lend=frozenset(d["lend"]),
        preferred_nodes={k: tuple(v) for k, v in d["preferred_nodes"].items()},
        extra={k: _parts_in(v) for k, v in d.get("extra", {}).items()},
        waiting={k: (str(c), str(t)) for k, (c, t) in d.get("waiting", {}).items()},
    )


def _parts_out(parts: tuple[tuple[GpuType, int], ...]) -> list[list[Any]]:
    return [[g, n] for g, n in parts]


def _parts_in(raw: Any) -> tuple[tuple[GpuType, int], ...]:
    return tuple((str(g), int(n)) for g, n in raw)


def assignment_to_dict(a: Assignment | None) -> dict[str, Any] | None:
    if a is None:
        return None
    out: dict[str, Any] = {
        "gpu_type": a.gpu_type,
        "workers": a.workers,
        "nodes": [list(n) for n in a.nodes],
        "partner": a.partner,
    }
    if a.extra:  # flexible workers on other GPU types (Lyra); absent otherwise
        out["extra"] = _parts_out(a.extra)
    return out


def assignment_from_dict(d: dict[str, Any] | None) -> Assignment | None:
    if d is None:
        return None
    return Assignment(
        gpu_type=d["gpu_type"],
        workers=int(d["workers"]),
        nodes=tuple((str(n), int(g)) for n, g in d["nodes"]),
        partner=d.get("partner"),
        extra=_parts_in(d.get("extra", ())),
    )


def job_to_dict(j: JobState) -> dict[str, Any]:
    return {"id": j.id, "spec": spec_to_dict(j.spec), **job_record(j)}


def job_record(j: JobState) -> dict[str, Any]:
    """A job's record without its id and spec: what changes while it lives. The
    incremental store writes this per changed job; the spec was written once, at submit."""
    return {
        "arrival_s": j.arrival_s,
        "status": j.status.value,
        "steps_done": j.steps_done,
        "attained_service_s": j.attained_service_s,
        "time_received_s": dict(j.time_received_s),
        "first_start_s": j.first_start_s,
        "finish_s": j.finish_s,
        "num_preemptions": j.num_preemptions,
        "num_resizes": j.num_resizes,
        "reclaim_preemptions": j.reclaim_preemptions,
        "current": assignment_to_dict(j.current),
        "launched_s": j.launched_s,
        "lease_from_s": j.lease_from_s,
        "launch_steps": j.launch_steps,
    }


job_fingerprint: Callable[[JobState], tuple[Any, ...]] = attrgetter(
    "status",
    "steps_done",
    "attained_service_s",
    "first_start_s",
    "finish_s",
    "num_preemptions",
    "num_resizes",
    "reclaim_preemptions",
    "current",
    "launched_s",
    "lease_from_s",
    "launch_steps",
)
"""Every field of :func:`job_record` that can change, as one cheap tuple (~0.3 us a job):
equal tuples mean an unchanged record, so a store writes only the jobs whose tuple moved.
``time_received_s`` is left out on purpose: it is a dict changed in place (its tuple slot
would compare the dict with itself), and it only ever moves together with
``attained_service_s`` (the core's accounting credits both, ``dt * workers`` with workers
>= 1), which is in the tuple; ``arrival_s`` never changes."""


def job_from_dict(d: dict[str, Any]) -> JobState:
    return JobState(
        id=d["id"],
        spec=spec_from_dict(d["spec"]),
        arrival_s=d["arrival_s"],
        status=JobStatus(d["status"]),
        steps_done=d["steps_done"],
        attained_service_s=d["attained_service_s"],
        time_received_s=dict(d["time_received_s"]),
        first_start_s=d["first_start_s"],
        finish_s=d["finish_s"],
        num_preemptions=d["num_preemptions"],
        num_resizes=d["num_resizes"],
        reclaim_preemptions=d.get("reclaim_preemptions", 0),
        current=assignment_from_dict(d["current"]),
        launched_s=d.get("launched_s"),
        lease_from_s=d.get("lease_from_s"),
        launch_steps=d.get("launch_steps", 0.0),
    )
