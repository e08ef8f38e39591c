"""One SQLite write transaction under a thread lock, shared by lyra's two stores.

Why one helper: the scheduler's store (``store.py``) and the teams' store
(``teams/store.py``) each own a connection used from the actor's threads; both need the
same rule (BEGIN IMMEDIATE under the lock, ROLLBACK on any exception, COMMIT when the
block ends, a ``return`` inside it included), and a second copy of it would drift.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def write_tx(lock: threading.Lock, db: sqlite3.Connection) -> Iterator[None]:
    """Committed when the block ends, rolled back when it raises."""
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
