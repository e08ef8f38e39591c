"""The scheduler's boundary: what a job must pass before it is queued, and whose it is.

:class:`Boundary` makes the checks only the live cluster can make, after the spec's own
(:func:`lyra_ray.model.spec.parse_job_spec`): the runtime env as the scheduler takes it
(URIs only; Ray's own validation; its packages present), every GPU type named exists
here, the job's minimum fits and its run time is bounded
(:func:`lyra_ray.model.admission.check_admissible`, as ``lyra simulate`` admits it),
and last, because it is the slowest, the entrypoint imports in the job's runtime env
(:mod:`lyra_ray.runtime.entrypoint_check`, never in the scheduler's own process).
Every refusal names the field; nothing is queued.

:class:`JobMeta` keeps what travels beside each job's spec (owner, runtime env, backend,
the Ray job that submitted it), read from the store at start and written with each
submission, so ownership holds for queued, running and archived jobs alike.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lyra_ray import model as m
from lyra_ray.model.admission import check_admissible
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec, run_options
from lyra_ray.model.throughput import MeasuredThroughputs
from lyra_ray.runtime.auth import Identity
from lyra_ray.runtime.entrypoint_check import EntrypointChecker
from lyra_ray.runtime.job_env import ray_check
from lyra_ray.runtime.store import StateStore

_RAY_JOB = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True)
class Accepted:
    """A job that passed every check: its spec and what travels beside it."""

    spec: m.JobSpec
    meta: dict[str, Any]


def source_of(raw: Any) -> str:
    name = raw.get("name") if isinstance(raw, Mapping) else None
    return f"job {name!r}" if name else "job"


def owned(raw: Any, who: Identity) -> Any:
    """The job as its submitter's: with identities on, ``user`` is the caller (a job
    naming someone else is refused); open, the job is as written."""
    if who.open or not isinstance(raw, Mapping):
        return raw
    user = raw.get("user")
    if user not in (None, "default", who.name):
        raise InputError(
            f"{source_of(raw)}: field 'user': a job belongs to whoever submits it; "
            f"you are {who.name!r}, the job names {user!r}"
        )
    return {**raw, "user": who.name}


def check_origin(origin: Any) -> dict[str, Any]:
    """Where a submission came from: ``{"ray_job": submission id}`` or nothing."""
    if origin is None:
        return {}
    if not isinstance(origin, Mapping) or set(origin) - {"ray_job"}:
        raise InputError(f"field 'origin': expected {{'ray_job': id}}, got {origin!r}"[:300])
    rj = origin.get("ray_job")
    if rj is not None and (not isinstance(rj, str) or not _RAY_JOB.fullmatch(rj)):
        raise InputError(f"field 'origin.ray_job': not a Ray job submission id: {rj!r}"[:300])
    return {"ray_job": rj} if rj else {}


class Boundary:
    def __init__(
        self,
        gpus: Callable[[bool], dict[str, int]],
        throughputs: MeasuredThroughputs,
        check_s: float,
    ) -> None:
        self.gpus = gpus
        self.throughputs = throughputs
        self.checker = EntrypointChecker(check_s)

    def validate(self, raw: Mapping[str, Any]) -> Accepted:
        """Parse + the live checks; raises InputError naming the field."""
        source = source_of(raw)
        gpus = self.gpus(False)
        try:
            spec = self._fits(raw, source, gpus)
        except InputError:
            # The scheduler's view is as old as its last cycle: a node that joined since
            # (the one the job needs, come back) must not get the job refused. Ask Ray.
            fresh = self.gpus(True)
            if fresh == gpus:
                raise
            spec = self._fits(raw, source, fresh)
        env, backend = run_options(raw, source, uploaded=True)
        try:
            ray_check(env)
        except InputError as e:
            raise InputError(f"{source}: {e}") from None
        assert spec.entrypoint is not None  # checked in _fits
        error = self.checker.check(spec.entrypoint, env)
        if error is not None:
            raise InputError(f"{source}: {error}")
        return Accepted(spec, {"runtime_env": env or None, "backend": backend})

    def _fits(self, raw: Mapping[str, Any], source: str, gpus: dict[str, int]) -> m.JobSpec:
        """The spec, if it names a GPU type of ``gpus`` and its minimum fits one type."""
        spec = parse_job_spec(
            raw,
            source=source,
            known_gpu_types=list(gpus),
            known_job_types=sorted(getattr(self.throughputs.seed, "job_types", ())) or None,
        )
        if spec.entrypoint is None:
            raise InputError(f"{source}: field 'entrypoint': required to run on the cluster")
        field = "workers" if not spec.elastic else "min_workers"
        check_admissible(spec, gpus, self.throughputs, source, field)
        return spec


class JobMeta:
    """job id -> (owner, meta); thread-safe, filled from the store once."""

    def __init__(self, store: StateStore) -> None:
        self._lock = threading.Lock()
        self._rows = store.job_meta()

    def put(self, job_id: str, owner: str | None, meta: dict[str, Any]) -> None:
        with self._lock:
            self._rows.setdefault(job_id, (owner, meta))

    def owner(self, job_id: str) -> str | None:
        with self._lock:
            row = self._rows.get(job_id)
        return row[0] if row else None

    def meta(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            row = self._rows.get(job_id)
        return row[1] if row else {}

    def decorate(self, row: dict[str, Any]) -> dict[str, Any]:
        """A job row with its owner and the Ray job that submitted it."""
        owner, meta = self._rows.get(str(row.get("id")), (None, {}))
        return {**row, "owner": owner, "ray_job": meta.get("ray_job"), "team": meta.get("team")}

    def team(self, job_id: str) -> str | None:
        """The team a job was submitted under (None: submitted before teams existed)."""
        with self._lock:
            row = self._rows.get(job_id)
        team = row[1].get("team") if row else None
        return team if isinstance(team, str) else None

    def visible(self, rows: list[dict[str, Any]], who: Identity) -> list[dict[str, Any]]:
        """The rows ``who`` may see (all for an admin or an open scheduler), decorated."""
        out = [self.decorate(r) for r in rows]
        return out if who.admin else [r for r in out if who.may_see(r["owner"], r["team"])]

    def may_access(self, job_id: str, who: Identity) -> bool:
        """Whether ``who`` may see ``job_id`` (its owner, an admin, a teammate). Callers
        answer "unknown job" when not, exactly as for an id that does not exist, so that
        a user cannot learn which ids other users' jobs have; cancelling needs
        :meth:`Identity.may_touch` besides."""
        return who.may_see(self.owner(job_id), self.team(job_id))
