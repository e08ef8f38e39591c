"""The scheduler's job desk: submit, cancel, status and list, for the SDK's callers.

A call lands in the SQLite inbox first (:meth:`StateStore.enqueue`), so an accepted job
survives a crash; the loop takes it in at its next cycle. Live-only checks
(:mod:`lyra_ray.runtime.boundary`: the runtime env, a GPU type this cluster has, enough
GPUs of one type, an entrypoint that imports in a task of its own) refuse bad input
before it can reach the core. Every call takes the caller's lyra token (``auth``): a
caller sees their own and their teammates' jobs and cancels only their own, unless an
admin; a job's team is chosen here (:mod:`lyra_ray.runtime.teams.registry`) and kept in its
metadata.

It owns the job metadata (owner, runtime env) and keeps the code packages of the jobs
it accepted alive (:class:`UriKeeper`); it reads the core, the archive and the
executor's records under the scheduler's lock.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.state import JobState, spec_to_dict
from lyra_ray.runtime.archive import JobArchive, describe
from lyra_ray.runtime.auth import Identity, Users
from lyra_ray.runtime.boundary import Boundary, JobMeta, check_origin, owned
from lyra_ray.runtime.job_env import RENEW_S, UriKeeper
from lyra_ray.runtime.ray_runtime import RayRuntime
from lyra_ray.runtime.store import StateStore
from lyra_ray.runtime.teams.registry import TeamRegistry
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle
from lyra_ray.scheduling.waiting import WaitReason


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24] or "job"


class JobDesk:
    def __init__(
        self,
        core: SchedulerCore,
        store: StateStore,
        users: Users,
        boundary: Boundary,
        jobmeta: JobMeta,
        archive: JobArchive,
        runtime: RayRuntime,
        reasons: Callable[[], Mapping[str, str]],
        lock: threading.RLock,
        wake: threading.Event,
        teams: TeamRegistry | None = None,
    ) -> None:
        """``reasons()``: why each failed job failed (the loop's store keeps them);
        ``teams``: the team a job runs under and who sees it (none: no teams)."""
        self.teams = teams
        self.core, self.store, self.users, self.boundary = core, store, users, boundary
        self.archive, self.runtime, self.reasons = archive, runtime, reasons
        self.lock, self.wake = lock, wake
        self.jobmeta = jobmeta
        self.keeper = UriKeeper()
        self._kept_at = 0.0

    # ------------------------------------------------------------------ calls

    def check(self, raw: dict[str, Any], auth: str | None = None) -> dict[str, Any]:
        who = self.users.identify(auth)
        try:
            self.boundary.validate(owned(raw, who))
        except InputError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True}

    def submit(
        self,
        raw: dict[str, Any],
        token: str | None = None,
        auth: str | None = None,
        origin: dict[str, Any] | None = None,
        team: str | None = None,
    ) -> dict[str, Any]:
        """Queue a job; ``token`` makes a retried call idempotent, ``auth`` is the
        caller's lyra token, ``origin`` names the Ray job that submitted it, ``team``
        the team it runs under (default: its owner's)."""
        reply = self.submit_all([raw], [token], auth, origin, team)
        if not reply["ok"]:
            return reply
        return {"ok": True, "job_id": reply["job_ids"][0]}

    def submit_all(
        self,
        raws: list[dict[str, Any]],
        tokens: list[str | None] | None = None,
        auth: str | None = None,
        origin: dict[str, Any] | None = None,
        team: str | None = None,
    ) -> dict[str, Any]:
        """Queue every job, or none if one is refused (the error names it).

        Each job is validated once, here, and what goes into the inbox is the accepted
        :class:`~lyra_ray.model.JobSpec` (serialised for the commit): the SDK sends the
        job as the user wrote it and checks nothing itself, so a job's ``model:`` is
        planned once, not once per layer it crosses.
        """
        who = self.users.identify(auth)
        if not isinstance(raws, list) or not raws:
            return {"ok": False, "error": "field 'jobs': expected a non-empty list of jobs"}
        tokens = list(tokens) if tokens is not None else [None] * len(raws)
        if len(tokens) != len(raws):
            return {"ok": False, "error": "field 'tokens': one per job"}
        try:
            meta = check_origin(origin)
            accepted = [self.boundary.validate(owned(raw, who)) for raw in raws]
            if self.teams is not None:
                meta["team"] = self.teams.for_submit(who, team, [a.spec for a in accepted])
            elif team is not None:
                raise InputError("field 'team': this scheduler keeps no teams")
        except InputError as e:
            return {"ok": False, "error": str(e)}
        ids = []
        for ok, token in zip(accepted, tokens, strict=True):
            job_meta = {**meta, **ok.meta}
            seq = self.store.next_seq("job_seq")
            jid = f"{_slug(ok.spec.name)}-{seq:04d}-{uuid.uuid4().hex[:4]}"
            got = self.store.enqueue(
                "submit", jid, spec_to_dict(ok.spec), token, meta=job_meta, owner=who.name
            )
            if got == jid:
                self.jobmeta.put(jid, who.name, job_meta)
                self.keeper.keep([job_meta.get("runtime_env")])
            ids.append(got)
        self.wake.set()
        return {"ok": True, "job_ids": ids}

    def identify(self, auth: str | None) -> Identity:
        """The caller, with their team (the teammates' "may see" rule)."""
        who = self.users.identify(auth)
        return self.teams.identity(who) if self.teams is not None else who

    def cancel(self, job_id: str, auth: str | None = None) -> dict[str, Any]:
        who = self.identify(auth)
        if not isinstance(job_id, str):
            return {"ok": False, "error": f"field 'job_id': expected a string, got {job_id!r}"}
        with self.lock:
            known = (
                job_id in self.core.jobs
                or self.archive.get(job_id) is not None
                or job_id in self._accepted()
            )
        if not known or not self.jobmeta.may_access(job_id, who):
            hint = "" if who.admin else " (a user sees only their own and their team's jobs)"
            return {"ok": False, "error": f"field 'job_id': unknown job {job_id!r}{hint}"}
        owner = self.jobmeta.owner(job_id)
        if not who.may_touch(owner):  # a teammate sees the job but may not cancel it
            return {
                "ok": False,
                "error": f"field 'job_id': job {job_id!r} is {owner}'s; only its owner or an "
                "admin may cancel it",
            }
        self.store.enqueue("cancel", job_id, {})
        self.wake.set()
        return {"ok": True, "job_id": job_id}

    def status(self, job_id: str, auth: str | None = None) -> dict[str, Any] | None:
        who = self.identify(auth)
        if not isinstance(job_id, str):
            return None
        row = self._status(job_id)
        if row is None or not self.jobmeta.may_access(job_id, who):
            return None  # another user's job is as unknown as a missing one
        return self.jobmeta.decorate(row)

    # ------------------------------------------------------------------ rows

    def _status(self, job_id: str) -> dict[str, Any] | None:
        with self.lock:
            j = self.core.jobs.get(job_id)
            if j is None:
                done = self.archive.get(job_id)
                if done is not None:
                    return done
                spec = self._accepted().get(job_id)
                return None if spec is None else _submitted(job_id, spec)
            return self._describe(j, self.core.wait_reasons())

    def all_jobs(self) -> list[dict[str, Any]]:
        """Every job, accepted, active and archived, sorted by id (``list`` and
        ``overview``); the caller holds the lock. An accepted job still in the inbox is
        listed as ``submitted``, so a job is never missing between ``submit`` and the
        cycle that takes it in."""
        waits = self.core.wait_reasons()
        rows = [self._describe(j, waits) for j in self.core.jobs.values()]
        rows += self.archive.records()
        taken = {str(r["id"]) for r in rows}  # accepted, not yet taken in: shown as such
        rows += [_submitted(j, s) for j, s in self._accepted().items() if j not in taken]
        return sorted(rows, key=lambda r: str(r["id"]))

    def _accepted(self) -> dict[str, dict[str, Any]]:
        """The inbox's accepted submits not yet taken into the core: job id -> spec."""
        return {r[2]: r[3] for r in self.store.pending() if r[1] == "submit"}

    def _describe(self, j: JobState, waits: Mapping[str, WaitReason]) -> dict[str, Any]:
        gen = self.runtime.generation(j.id)
        row = describe(j, self.core.now, gen, self.reasons().get(j.id))
        wait = waits.get(j.id)
        if wait is not None:  # why it waits: a stable code and a sentence
            row["reason"], row["reason_code"] = wait.message, wait.code
        last = self.runtime.phases.last(j.id)
        if last is not None:  # where its last resize or preemption spent its time
            row["last_restart"] = last
        return row

    # ------------------------------------------------------------------ the loop's observer

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        """Keep the code packages of every job not yet ended (and of those queued)."""
        if cycle.now - self._kept_at > RENEW_S / 4:
            self._kept_at = cycle.now
            active = list(core.jobs) + [r[2] for r in self.store.pending()]
            self.keeper.keep(self.jobmeta.meta(j).get("runtime_env") for j in active)

    def team_jobs(self, team: str) -> list[str]:
        """Ids of ``team``'s running or queued jobs (accepted ones not yet taken in too)."""
        with self.lock:
            ids = {jid for jid, j in self.core.jobs.items() if not j.status.terminal}
        ids |= set(self._accepted())
        if self.teams is None:
            return []
        of = self.teams.team_of_user
        return sorted(j for j in ids if (self.jobmeta.team(j) or of(self.jobmeta.owner(j))) == team)

    def list(self, auth: str | None = None) -> list[dict[str, Any]]:
        """Every job the caller may see (all for an admin), the archived ones too."""
        who = self.identify(auth)
        with self.lock:
            return self.jobmeta.visible(self.all_jobs(), who)


def _submitted(job_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The row of a job accepted but not yet in the core: the fields a queued job has, so
    that ``status`` and ``list`` show it from the moment ``submit`` returns."""
    return {
        "id": job_id,
        "name": spec.get("name"),
        "user": spec.get("user"),
        "status": "submitted",
        "assignment": None,
        "steps_done": 0.0,
        "total_steps": spec.get("total_steps"),
        "generation": 0,
        "reason": "accepted; the scheduler takes it in at its next cycle",
        "reason_code": "submitted",
    }
