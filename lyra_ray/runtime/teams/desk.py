"""The scheduler actor's team calls: ``lyra team add|set|remove|list|reference``, ``lyra
user add --team``, ``lyra user move``.

Each answers ``{"ok": True, ...}`` or ``{"ok": False, "error": <one line naming the
field>}`` like the user calls, and a refused call changes nothing. Removing a team with
running or queued jobs is refused unless ``force``, which cancels them first (through
the inbox, as ``lyra cancel`` does).
"""

from __future__ import annotations

import threading
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.teams import DEFAULT_TEAM
from lyra_ray.runtime.auth import Users
from lyra_ray.runtime.desk import JobDesk
from lyra_ray.runtime.teams.registry import TeamRegistry


class TeamDesk:
    def __init__(
        self, registry: TeamRegistry, users: Users, desk: JobDesk, wake: threading.Event
    ) -> None:
        self.registry, self.users, self.desk, self.wake = registry, users, desk, wake

    def add(self, name: str, settings: dict[str, Any], auth: str | None) -> dict[str, Any]:
        try:
            out = self.registry.add(name, settings, auth)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, **out}

    def change(self, name: str, settings: dict[str, Any], auth: str | None) -> dict[str, Any]:
        try:
            out = self.registry.change(name, settings, auth)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, **out}

    def remove(self, name: str, force: bool, auth: str | None) -> dict[str, Any]:
        try:
            self.users.require_admin(auth, "removing a team")
            team = self.registry.require_known(name, "name")
            if team == DEFAULT_TEAM:
                raise InputError("field 'name': the default team cannot be removed")
            active = self.desk.team_jobs(team)
            if active and not force:
                raise InputError(
                    f"field 'name': team {team!r} has {len(active)} running or queued job(s) "
                    f"({', '.join(active[:3])}{', ...' if len(active) > 3 else ''}); "
                    "--force cancels them"
                )
            for jid in active:
                self.desk.store.enqueue("cancel", jid, {})
            out = self.registry.remove(team, auth, active)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, **out}

    def list(self, auth: str | None) -> list[dict[str, Any]]:
        return self.registry.all(auth)

    def reference(self, reference: str | None, auth: str | None) -> dict[str, Any]:
        """The reference type of effective quotas: shown (``None``), or set (admins)."""
        try:
            if reference is None:
                self.users.identify(auth)
                return {"ok": True, **self.registry.settings()}
            out = self.registry.set_reference(reference, auth)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, **out}

    def user_add(
        self, name: str, admin: bool, team: str | None, auth: str | None
    ) -> dict[str, Any]:
        """A user and their first token, in ``team`` (checked before the user exists)."""
        try:
            if team is not None:
                self.registry.require_known(team)
            out = self.users.add(name, admin, auth)
            if team is not None and team != DEFAULT_TEAM:
                self.registry.join(out["name"], team)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True, **out, "team": team or self.registry.team_of_user(name)}

    def move(self, name: str, team: str, auth: str | None) -> dict[str, Any]:
        try:
            return {"ok": True, **self.registry.move(name, team, auth)}
        except InputError as e:
            return {"ok": False, "error": str(e)}
