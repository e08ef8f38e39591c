"""Identities and ownership: users, their tokens, and who may do what.

WHY here and not in Ray: Ray's token auth (on for ``lyra up``) keeps strangers off the
cluster, but everyone it lets in may call every method of every named actor. lyra's
scheduler actor is one of them, so every method that reads or changes jobs checks the
caller's lyra token itself (:meth:`Users.identify`) and lyra decides ownership: a job
belongs to whoever submitted it; only its owner or an admin may see or cancel it.

The rule for turning identities on: a scheduler whose store holds no user runs *open*
(every call allowed, as before identities existed: tests, benchmarks, embedded
clusters); the first user, necessarily an admin, turns identities on for good.
``lyra up --local`` creates that admin at once.

A token is ``lyra_<id>_<secret>``: 8 random bytes that find the row, 32 that prove it.
Only ``sha256(salt + secret)`` with a per-token random salt is stored. A fast hash is
enough here because the secret is 256 random bits, not a password: there is nothing to
guess, and the check costs microseconds on every SDK call (a slow KDF would cost tens of
milliseconds per ``status`` poll). No Ray import: unit-testable in milliseconds.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from lyra_ray.contract.errors import AuthError
from lyra_ray.contract.tokens import TOKEN_ENV, TOKEN_FILE_ENV
from lyra_ray.model.errors import InputError
from lyra_ray.runtime.store import StateStore

_TOKEN = re.compile(r"lyra_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class Identity:
    """Who is calling. ``name`` None: the scheduler runs open (no users)."""

    name: str | None
    admin: bool
    team: str | None = None
    """The caller's team, where the teams layer filled it in (``TeamRegistry.identity``)."""

    @property
    def open(self) -> bool:
        return self.name is None

    def may_touch(self, owner: str | None) -> bool:
        """Whether this caller may cancel (or see) a job owned by ``owner``."""
        return self.admin or (owner is not None and owner == self.name)

    def may_see(self, owner: str | None, team: str | None) -> bool:
        """Whether this caller may see a job: its own, an admin's view, or a teammate's
        job (a named team's: everyone is in ``default``, which shares nothing)."""
        return self.may_touch(owner) or (
            team is not None and team != "default" and team == self.team
        )


OPEN = Identity(None, True)


def check_name(name: Any) -> str:
    """A user name: 1-32 of ``a-z 0-9 _ -``, starting with a letter."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(
            f"field 'name': a user name is 1-32 characters of a-z, 0-9, '_' or '-', "
            f"starting with a letter; got {name!r}"
        )
    return name


def new_token() -> tuple[str, str, bytes, bytes]:
    """(token, token id, salt, digest): the token goes to the user once, the rest is kept."""
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    return f"lyra_{token_id}_{secret}", token_id, salt, _digest(salt, secret)


def _digest(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode()).digest()


def parse_token(token: Any) -> tuple[str, str] | None:
    """(token id, secret) of a well-formed token, else None."""
    if not isinstance(token, str):
        return None
    m = _TOKEN.fullmatch(token.strip())
    return (m.group(1), m.group(2)) if m else None


class Users:
    """The users and tokens in the scheduler's store, and the checks every call makes."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self.enabled = bool(store.users())
        """False while no user exists: the scheduler runs open."""

    def identify(self, token: Any) -> Identity:
        """The caller of a token; :data:`OPEN` when identities are off. Raises
        :class:`AuthError` for a missing or wrong token."""
        if not self.enabled:
            return OPEN
        if token is None or token == "":
            raise AuthError(
                f"this lyra cluster requires a token: set {TOKEN_ENV} (or {TOKEN_FILE_ENV}) "
                "to the token `lyra user add` printed for you"
            )
        parsed = parse_token(token)
        row = self.store.token(parsed[0]) if parsed else None
        if (
            parsed is None
            or row is None
            or not hmac.compare_digest(row[3], _digest(row[2], parsed[1]))
        ):
            raise AuthError(
                "invalid lyra token (malformed, revoked or from another cluster); "
                f"check {TOKEN_ENV}"
            )
        return Identity(row[0], row[1])

    def require_admin(self, token: Any, what: str) -> Identity:
        who = self.identify(token)
        if not who.admin:
            raise AuthError(f"{what} is for admins only; you are {who.name!r}")
        return who

    def add(self, name: Any, admin: bool, token: Any) -> dict[str, Any]:
        """Create a user and its first token (returned once). The first user of an open
        scheduler needs no token and must be an admin; after that, admins only."""
        name = check_name(name)
        if not isinstance(admin, bool):
            raise InputError(f"field 'admin': expected true or false, got {admin!r}")
        with self._lock:  # one bootstrap wins when two race
            if self.enabled:
                self.require_admin(token, "adding a user")
            elif not admin:
                raise InputError(
                    "field 'admin': the first user turns identities on and must be an "
                    "admin (`lyra user add NAME --admin`)"
                )
            secret, token_id, salt, digest = new_token()
            if not self.store.add_user(name, admin, token_id, salt, digest, time.time()):
                raise InputError(f"field 'name': user {name!r} exists")
            self.enabled = True
        return {"name": name, "admin": admin, "token": secret}

    def issue(self, name: Any, token: Any) -> dict[str, Any]:
        """Another token for an existing user (admins only); returned once."""
        self.require_admin(token, "issuing a token")
        name = check_name(name)
        secret, token_id, salt, digest = new_token()
        if not self.store.add_token(name, token_id, salt, digest, time.time()):
            raise InputError(f"field 'name': no user {name!r}")
        return {"name": name, "token": secret}

    def remove(self, name: Any, token: Any) -> dict[str, Any]:
        """Delete a user and all their tokens (admins only); their jobs stay theirs.
        The last admin cannot be removed (nobody could manage the cluster after)."""
        who = self.require_admin(token, "removing a user")
        name = check_name(name)
        with self._lock:
            users = self.store.users()
            admins = [n for n, a, _ in users if a]
            if name not in {n for n, _, _ in users}:
                raise InputError(f"field 'name': no user {name!r}")
            if admins == [name]:
                raise InputError(f"field 'name': {name!r} is the last admin")
            self.store.remove_user(name)
        return {"name": name, "removed_by": who.name}

    def list(self, token: Any) -> list[dict[str, Any]]:
        self.require_admin(token, "listing users")
        return [{"name": n, "admin": a, "created": c} for n, a, c in self.store.users()]
