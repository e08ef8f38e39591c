"""Page sessions: a login link's token exchanged for a cookie, as Jupyter does.

``lyra page`` prints a link with the caller's lyra token in it; the first load trades it
for a random session id in an HttpOnly cookie and redirects to the bare address, so the
token leaves the address bar (and the browser's history). The session keeps the token
in this process's memory only: every read of the scheduler goes out with it, so the
scheduler's own check decides what the session sees, and a token the scheduler no
longer accepts (its user removed) ends every session made from it (:meth:`end_token`).

Sessions expire after ``idle_s`` without a request and ``max_s`` after login, whichever
comes first. The clock is injected so the rules are tested without waiting.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

IDLE_S = 8 * 3600.0
MAX_S = 24 * 3600.0


@dataclass
class Session:
    sid: str
    token: str
    name: str
    admin: bool
    created: float
    seen: float


class SessionBook:
    def __init__(
        self, idle_s: float = IDLE_S, max_s: float = MAX_S, clock: Callable[[], float] = time.time
    ) -> None:
        if idle_s <= 0 or max_s <= 0:
            raise ValueError("session lifetimes must be positive")
        self.idle_s, self.max_s, self.clock = idle_s, max_s, clock
        self._sessions: dict[str, Session] = {}

    def open(self, token: str, name: str, admin: bool) -> Session:
        """A new session for a token the scheduler has just accepted."""
        now = self.clock()
        self._expire(now)
        s = Session(secrets.token_urlsafe(32), token, name, admin, now, now)
        self._sessions[s.sid] = s
        return s

    def get(self, sid: str | None) -> Session | None:
        """The live session ``sid`` names (its idle time restarts), else None."""
        if not sid:
            return None
        now = self.clock()
        self._expire(now)
        s = self._sessions.get(sid)
        if s is not None:
            s.seen = now
        return s

    def end(self, sid: str | None) -> bool:
        """Log out: whether a session ended."""
        return self._sessions.pop(sid or "", None) is not None

    def end_token(self, token: str) -> int:
        """End every session made from ``token`` (the scheduler refused it); how many."""
        gone = [k for k, s in self._sessions.items() if s.token == token]
        for k in gone:
            del self._sessions[k]
        return len(gone)

    def __len__(self) -> int:
        self._expire(self.clock())
        return len(self._sessions)

    def _expire(self, now: float) -> None:
        dead = [
            k
            for k, s in self._sessions.items()
            if now - s.seen > self.idle_s or now - s.created > self.max_s
        ]
        for k in dead:
            del self._sessions[k]
