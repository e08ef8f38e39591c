"""Durable scheduler state: one SQLite file under the state directory on the head node.

Two tables. ``inbox`` holds submissions and cancellations the moment the SDK call
returns, so an accepted job survives a scheduler crash before the loop has seen it.
``kv`` holds the latest core + runtime state; :meth:`commit` writes it and marks the
inbox rows it folded in, in *one* transaction — either both happened or neither.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    job_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0
);
"""


class StateStore:
    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "lyra.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def enqueue(
        self, kind: str, job_id: str, payload: dict[str, Any], token: str | None = None
    ) -> str:
        """Queue a request; with a ``token``, a retried request returns the first job id.

        Why tokens: a client whose call hit a restarting scheduler cannot know whether
        the call landed; retrying with the same token makes submit idempotent.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if token is not None:
                    row = self._db.execute(
                        "SELECT value FROM kv WHERE key = ?", (f"token:{token}",)
                    ).fetchone()
                    if row:
                        self._db.execute("COMMIT")
                        return str(row[0])
                    self._db.execute("INSERT INTO kv VALUES (?, ?)", (f"token:{token}", job_id))
                self._db.execute(
                    "INSERT INTO inbox (kind, job_id, payload) VALUES (?, ?, ?)",
                    (kind, job_id, json.dumps(payload)),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return job_id

    def next_seq(self, name: str) -> int:
        """A counter that survives restarts (job ids)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (name,)).fetchone()
            n = int(row[0]) + 1 if row else 1
            self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (name, str(n)))
            self._db.execute("COMMIT")
            return n

    def pending(self) -> list[tuple[int, str, str, dict[str, Any]]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, kind, job_id, payload FROM inbox WHERE consumed = 0 ORDER BY seq"
            ).fetchall()
        return [(int(s), k, j, json.loads(p)) for s, k, j, p in rows]

    def commit(self, state: dict[str, Any], consumed: list[int] | None = None) -> None:
        blob = json.dumps(state, sort_keys=True)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO kv VALUES ('state', ?)", (blob,))
                for seq in consumed or []:
                    self._db.execute("UPDATE inbox SET consumed = 1 WHERE seq = ?", (seq,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def load(self) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = 'state'").fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            self._db.close()
