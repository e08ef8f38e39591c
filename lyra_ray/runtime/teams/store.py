"""Teams and memberships in the scheduler's SQLite file, beside ``users``.

Two small tables, written only when an admin changes them (never by the per-cycle
commit, which :mod:`lyra_ray.runtime.delta` keeps incremental): ``teams`` (one row per
team, its settings as the JSON the ``lyra:`` config section and ``parse_teams`` take)
and ``team_members`` (user -> team; a user with no row belongs to ``default``). A job's
team travels in its ``job_meta`` row, written in the submission's own transaction.

WHY its own connection to the same file: the store's connection and lock belong to
:class:`~lyra_ray.runtime.store.StateStore`; SQLite serialises the two writers
(``BEGIN IMMEDIATE`` with a busy timeout) and WAL keeps each transaction whole, so a
killed scheduler restarts with every team and membership that an acknowledged call
wrote.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lyra_ray.model.teams import DEFAULT_TEAM

_SCHEMA = """
CREATE TABLE IF NOT EXISTS teams (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS team_members (user TEXT PRIMARY KEY, team TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS team_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class TeamStore:
    """The ``teams`` and ``team_members`` tables of the scheduler's database."""

    def __init__(self, db_path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            str(db_path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        with self._write():
            self._db.execute(
                "INSERT OR IGNORE INTO teams VALUES (?, ?)", (DEFAULT_TEAM, json.dumps({}))
            )

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def teams(self) -> dict[str, dict[str, Any]]:
        """Every team's settings (``parse_teams``'s body of one team), by name."""
        with self._lock:
            rows = self._db.execute("SELECT name, body FROM teams ORDER BY name").fetchall()
        return {str(n): dict(json.loads(b)) for n, b in rows}

    def members(self) -> dict[str, str]:
        """user -> team of every user with a row (the others are in ``default``)."""
        with self._lock:
            rows = self._db.execute("SELECT user, team FROM team_members").fetchall()
        return {str(u): str(t) for u, t in rows}

    def put_teams(
        self, teams: Mapping[str, Mapping[str, Any]], members: Mapping[str, str] | None = None
    ) -> None:
        """Create or replace teams (and set memberships) in one transaction."""
        with self._write():
            self._db.executemany(
                "INSERT OR REPLACE INTO teams VALUES (?, ?)",
                [(n, json.dumps(dict(b), sort_keys=True)) for n, b in teams.items()],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO team_members VALUES (?, ?)", list((members or {}).items())
            )

    def remove_team(self, name: str) -> None:
        """Delete a team; its members go back to ``default`` (same transaction)."""
        with self._write():
            self._db.execute("DELETE FROM teams WHERE name = ?", (name,))
            self._db.execute(
                "UPDATE team_members SET team = ? WHERE team = ?", (DEFAULT_TEAM, name)
            )

    def set_member(self, user: str, team: str) -> None:
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO team_members VALUES (?, ?)", (user, team))

    def forget_member(self, user: str) -> None:
        with self._write():
            self._db.execute("DELETE FROM team_members WHERE user = ?", (user,))

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM team_kv WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def put(self, key: str, value: str) -> None:
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO team_kv VALUES (?, ?)", (key, value))

    def close(self) -> None:
        with self._lock:
            self._db.close()
