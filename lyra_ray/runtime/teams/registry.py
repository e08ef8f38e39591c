"""Teams on the live cluster: who manages them, who belongs where, and what a job may ask.

The live scheduler's owner of teams (:class:`TeamRegistry`): the admin operations behind
``lyra team add|set|remove|list`` and ``lyra user add --team`` / ``lyra user move``, the
team a submitted job runs under, and the team set the policy and ``lyra status`` read.
Every change is checked by the pure :func:`lyra_ray.model.teams.parse_teams` on the
whole set as it would be (one parser for the ``lyra:`` config, ``lyra simulate --teams``
and these calls), against the cluster's GPUs, *before* anything is written: a refused
call names the field and changes nothing. Writes go to
:class:`~lyra_ray.runtime.teams.store.TeamStore` (restart-safe), and so do the two
settings of the whole set: the reference type of effective quotas (``lyra team
reference``; default: the cluster's most common training type) and how quotas are
enforced (``enforce``: ``inside`` the policy, or ``pin``, the path before issue #42).

Guarantees are checked against the cluster wherever they come from: ``lyra team
add|set`` refuses a set the cluster cannot hold (GPUs by type; effective quotas against
the cluster's capacity in reference units for the queued and running jobs); the
``lyra:`` config, read before the scheduler knows its nodes, and a node that leaves are
checked every few seconds by :meth:`TeamRegistry.check_capacity`, which logs an
oversubscribed cluster and shows it in ``lyra status``.

Rules. Management is for admins (a scheduler with no user runs open, as for users).
``default`` (no limit) always exists and cannot be removed or limited. A user with no
membership belongs to ``default``. A job runs under the team named at submit (a team its
owner belongs to; an admin may name any) or else its owner's team, and keeps it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from lyra_ray.model import ClusterSnapshot, JobSpec
from lyra_ray.model.errors import InputError
from lyra_ray.model.team_accounting import (
    TeamStanding,
    effective_capacity,
    job_cost,
    reference_factors,
)
from lyra_ray.model.teams import AUTO, DEFAULT_TEAM, TeamSet, parse_reference, parse_teams
from lyra_ray.model.types import ThroughputModel
from lyra_ray.runtime.auth import Identity, Users
from lyra_ray.runtime.teams.sets import LiveTeamSet, oversubscribed, standings
from lyra_ray.runtime.teams.store import TeamStore

log = logging.getLogger(__name__)

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
SETTINGS = ("quota", "quota_effective", "weight", "borrow_limit", "lend_limit", "preemptible")
CONFIG_KEY = "config_applied"
REFERENCE_KEY = "reference"
ENFORCE_KEY = "enforce"


def check_team_name(name: Any, field: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(
            f"field '{field}': a team name is 1-32 characters of a-z, 0-9, '_' or '-', "
            f"starting with a letter; got {name!r}"[:300]
        )
    return name


class TeamRegistry:
    def __init__(
        self,
        store: TeamStore,
        users: Users,
        gpus: Callable[[], dict[str, int]],
        throughputs: ThroughputModel,
        job_team: Callable[[str], str | None],
        active: Callable[[], list[JobSpec]] | None = None,
    ) -> None:
        """``gpus()``: the training pool's GPUs per type; ``job_team(id)``: the team a
        job was submitted under (its metadata), None for a job from before teams;
        ``active()``: the specs of the queued and running jobs (effective quotas are
        checked against the cluster's capacity in reference units for them)."""
        self.store, self.users, self.gpus = store, users, gpus
        self.throughputs, self.job_team = throughputs, job_team
        self.active = active or list
        self._lock = threading.Lock()
        self.set: TeamSet = self._load()
        self.warning: str | None = None
        """Why the guarantees do not fit the cluster now (:meth:`check_capacity`)."""

    def _load(self) -> TeamSet:
        teams = self.store.teams()
        members = {u: t for u, t in self.store.members().items() if t in teams}
        raw = {
            "teams": teams,
            "users": members,
            "reference": self.store.get(REFERENCE_KEY) or None,
            "enforce": self.store.get(ENFORCE_KEY) or "inside",
        }
        return parse_teams(raw, "the stored teams")

    def _check(self, teams: Mapping[str, Mapping[str, Any]], source: str) -> TeamSet:
        gpus = self.gpus()
        raw = {"teams": dict(teams), "reference": self.set.reference}
        candidate = parse_teams(raw, source)
        eff = self.effective_capacity(candidate, gpus) if candidate.unit == "effective" else None
        return parse_teams(raw, source, gpus, eff)

    def effective_capacity(self, teams: TeamSet, gpus: Mapping[str, int]) -> float:
        """The cluster's capacity in reference units for the queued and running jobs
        (the capacity rule of :mod:`lyra_ray.model.team_accounting`)."""
        ref = teams.reference_for(gpus)
        f = reference_factors(self.active(), gpus, self.throughputs, ref)
        return effective_capacity(gpus, f)

    # ------------------------------------------------------------------ config

    def apply_config(self, raw: Any) -> None:
        """The ``lyra:`` section's ``teams`` (``{teams: ..., users: ...}``), written once
        per distinct config: a restarted actor (same config) keeps what admins changed
        since; a cluster brought up with a changed config takes the new one."""
        if raw is None:
            return
        blob = json.dumps(raw, sort_keys=True, default=str)
        if self.store.get(CONFIG_KEY) == blob:
            return
        parsed = parse_teams(raw, "lyra config: field 'teams'")
        bodies = {
            n: {k: v for k, v in dict(raw["teams"].get(n) or {}).items() if k in SETTINGS}
            for n in parsed.teams
            if n in raw["teams"]
        }
        with self._lock:
            self.store.put_teams(bodies, parsed.users)
            self.store.put(REFERENCE_KEY, parsed.reference or "")
            self.store.put(ENFORCE_KEY, parsed.enforce)
            self.store.put(CONFIG_KEY, blob)
            self.set = self._load()

    def set_reference(self, raw: Any, auth: str | None) -> dict[str, Any]:
        """``lyra team reference TYPE|auto``: the reference type of effective quotas, a
        type the cluster has (``auto``: its most common training type). The guarantees
        are checked again in the new unit before anything is written."""
        self.users.require_admin(auth, "changing the reference type")
        ref = parse_reference(raw, "team reference", self.gpus())
        with self._lock:
            old = self.set.reference
            self.set = dataclasses.replace(self.set, reference=ref)
            try:
                self._check(self.store.teams(), "team reference")
            except InputError:
                self.set = dataclasses.replace(self.set, reference=old)
                raise
            self.store.put(REFERENCE_KEY, ref or "")
            self.set = self._load()
        return self.settings()

    def settings(self) -> dict[str, Any]:
        """The set's own settings: the reference type (as set, and the one in force)."""
        return {
            "reference": self.set.reference or AUTO,
            "reference_in_force": self.set.reference_for(self.gpus()),
            "enforce": self.set.enforce,
            "oversubscribed": self.warning,
        }

    def check_capacity(self, snap: ClusterSnapshot) -> str | None:
        """The guarantees against the cluster as it is (nodes may have left since they
        were set; the config's were never checked against nodes): logged when the
        answer changes, kept for ``lyra status``."""
        why = oversubscribed(snap, self.set) if self.set.any_limited else None
        if why != self.warning:
            if why is not None:
                log.warning("teams' guarantees do not fit the cluster: %s", why)
            else:
                log.info("teams' guarantees fit the cluster again")
            self.warning = why
        return why

    # ------------------------------------------------------------------ admin operations

    def add(self, name: Any, body: Any, auth: str | None) -> dict[str, Any]:
        self.users.require_admin(auth, "adding a team")
        name = check_team_name(name)
        body = _body(body)
        with self._lock:
            bodies = self.store.teams()
            if name in bodies:
                raise InputError(f"field 'name': team {name!r} exists; `lyra team set` changes it")
            bodies[name] = body
            self._check(bodies, "team add")
            self.store.put_teams({name: body})
            self.set = self._load()
        return self.describe(name)

    def change(self, name: Any, changes: Any, auth: str | None) -> dict[str, Any]:
        """Change some of a team's settings (``None`` clears a limit)."""
        self.users.require_admin(auth, "changing a team")
        name = check_team_name(name)
        changes = _body(changes)
        with self._lock:
            bodies = self.store.teams()
            if name not in bodies:
                raise InputError(f"field 'name': unknown team {name!r}")
            if name == DEFAULT_TEAM and (
                changes.get("quota") is not None or changes.get("quota_effective") is not None
            ):
                raise InputError("field 'quota': the default team has no quota limit")
            body = dict(bodies[name])
            if "quota" in changes:
                body.pop("quota_effective", None)
            if "quota_effective" in changes:
                body.pop("quota", None)
            body.update(changes)
            body = {k: v for k, v in body.items() if v is not None}
            bodies[name] = body
            self._check(bodies, "team set")
            self.store.put_teams({name: body})
            self.set = self._load()
        return self.describe(name)

    def remove(self, name: Any, auth: str | None, active: list[str]) -> dict[str, Any]:
        """Delete a team (its members go to ``default``); the caller checked and, with
        ``--force``, cancelled ``active`` (its running or queued jobs)."""
        who = self.users.require_admin(auth, "removing a team")
        name = check_team_name(name)
        if name == DEFAULT_TEAM:
            raise InputError("field 'name': the default team cannot be removed")
        with self._lock:
            if name not in self.store.teams():
                raise InputError(f"field 'name': unknown team {name!r}")
            self.store.remove_team(name)
            self.set = self._load()
        return {"name": name, "removed_by": who.name, "cancelled": active}

    def require_known(self, raw: Any, field: str = "team") -> str:
        name = check_team_name(raw, field)
        if name not in self.set.teams:
            raise InputError(
                f"field '{field}': unknown team {name!r}; teams: "
                f"{', '.join(sorted(self.set.teams))}"[:300]
            )
        return name

    def move(self, user: Any, team: Any, auth: str | None) -> dict[str, Any]:
        self.users.require_admin(auth, "moving a user")
        team = self.require_known(team)
        if not isinstance(user, str) or user not in {n for n, _, _ in self.users.store.users()}:
            raise InputError(f"field 'name': no user {user!r}"[:300])
        with self._lock:
            self.store.set_member(user, team)
            self.set = self._load()
        return {"name": user, "team": team}

    def join(self, user: str, team: str) -> None:
        """A new user's membership (the team was checked with :meth:`require_known`)."""
        with self._lock:
            self.store.set_member(user, team)
            self.set = self._load()

    def forget(self, user: str) -> None:
        """A removed user's membership (a new user of that name starts in ``default``)."""
        with self._lock:
            self.store.forget_member(user)
            self.set = self._load()

    def all(self, auth: str | None) -> list[dict[str, Any]]:
        self.users.identify(auth)
        return [self.describe(n) for n in sorted(self.set.teams)]

    def describe(self, name: str) -> dict[str, Any]:
        t = self.set.teams[name]
        members = sorted(u for u, team in self.set.users.items() if team == name)
        return {
            "name": name,
            "unit": t.unit,
            "quota": t.guarantee() if t.limited else None,
            "weight": t.weight,
            "borrow_limit": t.borrow_limit,
            "lend_limit": t.lend_limit,
            "preemptible": t.preemptible,
            "members": members,
        }

    # ------------------------------------------------------------------ jobs

    def team_of_user(self, user: str | None) -> str:
        return self.set.users.get(user or "", DEFAULT_TEAM)

    def identity(self, who: Identity) -> Identity:
        """``who`` with its team (for the teammates' "may see" rule)."""
        return dataclasses.replace(who, team=self.team_of_user(who.name))

    def for_submit(self, who: Identity, team: Any, specs: list[JobSpec]) -> str:
        """The team these jobs run under; InputError (naming the field) for an unknown
        team, one the caller is not in, or a job the team can never run."""
        if team is None:
            owner = who.name if not who.open else (specs[0].user if specs else None)
            name = self.team_of_user(owner)
        else:
            name = self.require_known(team)
            mine = self.team_of_user(who.name)
            if not who.admin and name != mine:
                raise InputError(
                    f"field 'team': you are not in team {name!r} (your team is {mine!r})"
                )
        for spec in specs:
            self._fits(spec, name)
        return name

    def _fits(self, spec: JobSpec, name: str) -> None:
        t = self.set.teams[name]
        if not t.limited:
            return
        borrow = math.inf if t.borrow_limit is None else t.borrow_limit
        best: tuple[float, str, float] | None = None
        gpus = self.gpus()
        ref = self.set.reference_for(gpus)
        f = (
            reference_factors([*self.active(), spec], gpus, self.throughputs, ref)
            if t.unit == "effective"
            else None
        )
        for g, have in sorted(gpus.items()):
            if (
                have < spec.min_workers
                or self.throughputs.throughput(spec, g, spec.min_workers) <= 0
            ):
                continue
            key, need = job_cost(spec, g, spec.min_workers, self.throughputs, t.unit, ref, f)
            ever = t.guarantee().get(key, 0.0) + borrow
            if need <= ever + 1e-9:
                return
            if best is None or need - ever < best[0] - best[2]:
                best = (need, key, ever)
        if best is not None:
            need, key, ever = best
            raise InputError(
                f"job {spec.name!r}: field 'team': team {name!r} can never give it "
                f"{need:g} {key}: its guarantee plus borrow limit is {ever:g}"
            )

    def for_snapshot(self, snap: ClusterSnapshot) -> LiveTeamSet:
        """The team set the policy decides with: every job mapped to its own team."""
        s = self.set
        by_spec: dict[int, str] = {}
        if s.any_limited:
            for j in snap.jobs:
                team = self.job_team(j.id)
                if team is not None:
                    by_spec[id(j.spec)] = team
        return LiveTeamSet(
            teams=s.teams,
            users=s.users,
            jobs=s.jobs,  # the set's own objects: the policy keeps its per-job teams while
            reference=s.reference,  # they stay the same (TeamPolicy._team_map)
            enforce=s.enforce,
            by_spec=by_spec,
        )

    def standings(self, snap: ClusterSnapshot) -> list[TeamStanding]:
        """Each team's guarantee, use, borrowed and lent capacity (running jobs only are
        looked up: a long queue costs nothing here)."""
        s = self.set
        by_spec = {
            id(j.spec): t
            for j in snap.jobs
            if j.current is not None and (t := self.job_team(j.id)) is not None
        }
        live = LiveTeamSet(
            teams=s.teams, users=s.users, reference=s.reference, enforce=s.enforce, by_spec=by_spec
        )
        return standings(snap, live)


def _body(raw: Any) -> dict[str, Any]:
    """A team's settings as the CLI/SDK send them; unknown keys name the field."""
    if not isinstance(raw, Mapping):
        raise InputError(f"field 'settings': expected a mapping, got {raw!r}"[:300])
    unknown = sorted(str(k) for k in raw if k not in SETTINGS)
    if unknown:
        raise InputError(f"field '{unknown[0]}': unknown; known: {', '.join(SETTINGS)}")
    if raw.get("quota") is not None and raw.get("quota_effective") is not None:
        raise InputError("field 'quota': give 'quota' or 'quota_effective', not both")
    return dict(raw)
