"""Durable scheduler state: one SQLite file under the state directory on the head node.

Tables. ``inbox`` holds submissions and cancellations the moment the SDK call
returns, so an accepted job survives a scheduler crash before the loop has seen it.
``kv`` holds the latest core + runtime state; :meth:`commit` writes it, marks the inbox
rows it folded in and archives the jobs that ended, in *one* transaction — either all
happened or none. ``archive`` holds every terminal job's last record: they leave the
per-cycle state (which stays as large as the active jobs, not as all jobs ever seen)
and ``status`` / ``list`` read them here. ``job_meta`` holds what travels beside a job's
spec (its owner, runtime env, backend, the Ray job that submitted it), written in the
submission's own transaction, so an accepted job never lacks them; ``users`` and
``tokens`` hold identities (a token only as a salted hash, :mod:`lyra_ray.runtime.auth`).
The live scheduler keeps its state incrementally instead (:meth:`commit_delta`, issue
#33): a row per job in ``jobs`` (spec copied from its inbox row once), the rest in
``parts`` and ``part_rows``, written only where a cycle changed them (docs/reliability.md).

Durability (issue #17): WAL journal, ``synchronous=FULL``. WAL alone survives a killed
process at any synchronous level — a transaction is in the WAL whole or not at all
(``tests/unit/test_store_crash.py`` SIGKILLs writers mid-transaction in a loop). FULL
adds an fsync of the WAL at every commit, so a commit also survives an OS crash or a
power cut. Both kinds of commit need that: a submission is acknowledged to the client
once its commit returns ("accepted" must mean "kept"), and the cycle's state is
committed *before* its actions are applied, so a run started by an action is always
recorded; with NORMAL, a power cut could keep the run and lose its record, and the
restarted scheduler would start the job a second time. The price: an fsync per commit,
~0.2-0.5 ms on this host's disk when it is quiet (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lyra_ray.runtime.store_layout import Delta, assemble

__all__ = ["SYNCHRONOUS", "Delta", "StateStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    job_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS inbox_pending ON inbox (seq) WHERE consumed = 0;
CREATE TABLE IF NOT EXISTS archive (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS job_meta (
    job_id TEXT PRIMARY KEY,
    owner TEXT,
    meta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS parts (path TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS part_rows (
    path TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (path, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    admin INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    salt BLOB NOT NULL,
    digest BLOB NOT NULL,
    created REAL NOT NULL
);
"""
SYNCHRONOUS = "FULL"
"""See the module docstring: every commit is fsynced before it returns."""
STATE_FORMAT = 1
"""The layout this lyra writes (kv ``format``). A store without the key was written before
it was kept, in this layout. A later lyra that changes the layout bumps it, and an older
lyra refuses that store in one line, touching nothing (:mod:`lyra_ray.runtime.saved_state`)."""


class StateStore:
    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "lyra.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO kv VALUES ('format', ?)", (str(STATE_FORMAT),))

    def enqueue(
        self,
        kind: str,
        job_id: str,
        payload: dict[str, Any],
        token: str | None = None,
        meta: dict[str, Any] | None = None,
        owner: str | None = None,
    ) -> str:
        """Queue a request; with a ``token``, a retried request returns the first job id.

        Why tokens: a client whose call hit a restarting scheduler cannot know whether
        the call landed; retrying with the same token makes submit idempotent. ``meta``
        and ``owner`` (a submission's) go into ``job_meta`` in the same transaction.
        """
        with self._write():
            if token is not None:
                row = self._db.execute(
                    "SELECT value FROM kv WHERE key = ?", (f"token:{token}",)
                ).fetchone()
                if row:
                    return str(row[0])
                self._db.execute("INSERT INTO kv VALUES (?, ?)", (f"token:{token}", job_id))
            self._db.execute(
                "INSERT INTO inbox (kind, job_id, payload) VALUES (?, ?, ?)",
                (kind, job_id, json.dumps(payload)),
            )
            if meta is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO job_meta VALUES (?, ?, ?)",
                    (job_id, owner, json.dumps(meta, sort_keys=True)),
                )
        return job_id

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction under the lock: committed when the block ends (a
        ``return`` inside it included), rolled back when it raises."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def next_seq(self, name: str) -> int:
        """A counter that survives restarts (job ids)."""
        with self._write():
            row = self._db.execute("SELECT value FROM kv WHERE key = ?", (name,)).fetchone()
            n = int(row[0]) + 1 if row else 1
            self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (name, str(n)))
        return n

    def pending(self) -> list[tuple[int, str, str, dict[str, Any]]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, kind, job_id, payload FROM inbox WHERE consumed = 0 ORDER BY seq"
            ).fetchall()
        return [(int(s), k, j, json.loads(p)) for s, k, j, p in rows]

    def commit(
        self,
        state: dict[str, Any],
        consumed: list[int] | None = None,
        archive: Sequence[tuple[str, dict[str, Any]]] = (),
    ) -> int:
        """Write the state, mark ``consumed`` inbox rows and archive ``(job id, record)``
        rows, atomically; returns the bytes written (the per-cycle write's size)."""
        blob = json.dumps(state, sort_keys=True)
        rows = [(jid, json.dumps(rec, sort_keys=True)) for jid, rec in archive]
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO kv VALUES ('state', ?)", (blob,))
            # the whole state replaces an incremental one (one layout at a time)
            for table in ("jobs", "parts", "part_rows"):
                self._db.execute(f"DELETE FROM {table}")
            self._consume_and_archive(consumed or [], rows)
        return len(blob) + sum(len(r) for _, r in rows)

    def _consume_and_archive(self, consumed: Sequence[int], rows: list[tuple[str, str]]) -> None:
        """Inside a commit's transaction: mark the inbox rows folded in, archive the jobs
        that ended."""
        for seq in consumed:
            self._db.execute("UPDATE inbox SET consumed = 1 WHERE seq = ?", (seq,))
        # OR REPLACE: archiving a job twice must not fail the whole commit
        self._db.executemany("INSERT OR REPLACE INTO archive (job_id, record) VALUES (?, ?)", rows)

    def commit_delta(
        self,
        delta: Delta,
        consumed: Sequence[int] = (),
        archive: Sequence[tuple[str, dict[str, Any]]] = (),
    ) -> int:
        """Write what a cycle changed (:class:`Delta`), mark ``consumed`` inbox rows and
        archive rows, in one transaction, as :meth:`commit` does; returns the bytes written.

        A new job's spec is copied inside SQLite from the inbox row that submitted it
        (it was serialised once, at submit); only a job with no such row serialises it
        (``Delta.new``). :meth:`load` reassembles the state :meth:`commit` would have kept.
        """
        rows = [(jid, json.dumps(rec, sort_keys=True)) for jid, rec in archive]
        size = sum(len(r) for _, r in rows)
        db = self._db
        with self._write():
            db.execute("DELETE FROM kv WHERE key = 'state'")
            if delta.reset:  # the writer knows nothing of what is stored: rewrite it all
                keep = {jid for jid, _ in delta.jobs}
                old = [r[0] for r in db.execute("SELECT job_id FROM jobs") if r[0] not in keep]
                db.executemany("DELETE FROM jobs WHERE job_id = ?", [(j,) for j in old])
                db.execute("DELETE FROM parts")
                db.execute("DELETE FROM part_rows")
            for jid, spec_of in delta.new.items():
                if db.execute("SELECT 1 FROM jobs WHERE job_id = ?", (jid,)).fetchone():
                    continue  # stored before (a reset after a restart): its spec stays
                row = db.execute(
                    "SELECT payload FROM inbox WHERE job_id = ? AND kind = 'submit' "
                    "ORDER BY seq DESC LIMIT 1",
                    (jid,),
                ).fetchone()
                spec = str(row[0]) if row else spec_of()
                db.execute("INSERT INTO jobs VALUES (?, ?, '')", (jid, spec))
                size += len(spec)
            db.executemany(
                "UPDATE jobs SET record = ? WHERE job_id = ?", [(r, j) for j, r in delta.jobs]
            )
            db.executemany("DELETE FROM jobs WHERE job_id = ?", [(j,) for j in delta.removed])
            db.executemany("INSERT OR REPLACE INTO parts VALUES (?, ?)", delta.parts)
            db.executemany("INSERT OR REPLACE INTO part_rows VALUES (?, ?, ?)", delta.rows)
            db.executemany("DELETE FROM part_rows WHERE path = ? AND key = ?", delta.rows_removed)
            self._consume_and_archive(consumed, rows)
        size += sum(len(r) for _, r in delta.jobs)
        size += sum(len(v) for _, v in delta.parts) + sum(len(v) for _, _, v in delta.rows)
        return size

    def archived(self, job_id: str) -> dict[str, Any] | None:
        """An archived job's record, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM archive WHERE job_id = ?", (job_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def archive_records(self) -> list[dict[str, Any]]:
        """Every archived record, in the order the jobs ended."""
        with self._lock:
            rows = self._db.execute("SELECT record FROM archive ORDER BY seq").fetchall()
        return [json.loads(r) for (r,) in rows]

    def archive_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM archive").fetchone()[0])

    # ------------------------------------------------------------------ job meta

    def job_meta(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """Every job's (owner, meta): read once at start; the scheduler caches it."""
        with self._lock:
            rows = self._db.execute("SELECT job_id, owner, meta FROM job_meta").fetchall()
        return {j: (o, json.loads(m)) for j, o, m in rows}

    # ------------------------------------------------------------------ identities

    def users(self) -> list[tuple[str, bool, float]]:
        """(name, admin, created) of every user, by name."""
        with self._lock:
            rows = self._db.execute("SELECT name, admin, created FROM users ORDER BY name")
            return [(str(n), bool(a), float(c)) for n, a, c in rows.fetchall()]

    def add_user(
        self, name: str, admin: bool, token_id: str, salt: bytes, digest: bytes, now: float
    ) -> bool:
        """Create a user with its first token, atomically; False if the name is taken."""
        with self._write():
            if self._db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                return False
            self._db.execute("INSERT INTO users VALUES (?, ?, ?)", (name, int(admin), now))
            self._add_token_row(name, token_id, salt, digest, now)
        return True

    def add_token(self, name: str, token_id: str, salt: bytes, digest: bytes, now: float) -> bool:
        """One more token for an existing user; False if there is no such user."""
        with self._write():
            if not self._db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                return False
            self._add_token_row(name, token_id, salt, digest, now)
        return True

    def _add_token_row(
        self, name: str, token_id: str, salt: bytes, digest: bytes, now: float
    ) -> None:
        self._db.execute(
            "INSERT INTO tokens VALUES (?, ?, ?, ?, ?)", (token_id, name, salt, digest, now)
        )

    def remove_user(self, name: str) -> bool:
        """Delete a user and every token of theirs; False if there is no such user."""
        with self._write():
            gone = self._db.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount
            self._db.execute("DELETE FROM tokens WHERE name = ?", (name,))
        return bool(gone)

    def token(self, token_id: str) -> tuple[str, bool, bytes, bytes] | None:
        """(user, admin, salt, digest) of a token id, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT t.name, u.admin, t.salt, t.digest FROM tokens t "
                "JOIN users u ON u.name = t.name WHERE t.token_id = ?",
                (token_id,),
            ).fetchone()
        return (str(row[0]), bool(row[1]), bytes(row[2]), bytes(row[3])) if row else None

    def save_seed(self, table: dict[str, Any]) -> None:
        """The throughput table the scheduler was seeded with (``lyra up --throughputs``):
        written once, apart from the per-cycle state, so a restart that is given no table
        decides from the same one and no cycle pays for writing it again."""
        blob = json.dumps(table, sort_keys=True)
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO kv VALUES ('throughputs', ?)", (blob,))

    def seed(self) -> dict[str, Any] | None:
        """The table :meth:`save_seed` kept, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = 'throughputs'").fetchone()
        return json.loads(row[0]) if row else None

    def format(self) -> int:
        """The layout the store was written in (:data:`STATE_FORMAT`)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = 'format'").fetchone()
        return int(row[0]) if row else STATE_FORMAT

    def load(self) -> dict[str, Any] | None:
        """The last committed state, as :meth:`commit` was given it, whichever way it was
        written (the whole state, or :meth:`commit_delta`'s parts reassembled)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE key = 'state'").fetchone()
            if row:
                return dict(json.loads(row[0]))
            parts = self._db.execute("SELECT path, value FROM parts").fetchall()
            prows = self._db.execute("SELECT path, key, value FROM part_rows").fetchall()
            jobs = self._db.execute("SELECT job_id, spec, record FROM jobs").fetchall()
        if not parts:
            return None
        return assemble(parts, prows, jobs)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self) -> None:
        """Copy what the WAL holds into the database file now (a passive checkpoint: it
        waits for no reader). The live loop calls this between cycles
        (:mod:`lyra_ray.runtime.wal_pacing`)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def auto_checkpoint(self, pages: int) -> None:
        """Let a commit checkpoint once the WAL holds ``pages`` pages (SQLite's default:
        1,000); a checkpoint inside a commit makes that commit wait for it."""
        with self._lock:
            self._db.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
