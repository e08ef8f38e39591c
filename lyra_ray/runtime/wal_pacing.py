"""SQLite's WAL checkpoints, run between scheduling cycles instead of inside commits.

WHY: in WAL mode SQLite copies the log back into the database file (a checkpoint, with
an fsync of the file) inside whichever commit finds the log over 1,000 pages. With
10,000 queued jobs a cycle writes ~1,000 job records, and a round ~2,000 rows of the
round tables besides: nearly every such commit crossed the threshold and paid the
checkpoint, ~8-10 ms of its ~15 ms (``benchmarks/scale_cycle.py``: a backfill's
commit with the checkpoint 13 ms, without it 5 ms). As with the collector
(:mod:`.gc_pacing`), the live loop has idle time between its cycles: it checkpoints
there, after each cycle's commits, and commits checkpoint only as a backstop, when the
log holds :data:`BACKSTOP_PAGES` (a loop that stopped calling, say).

Nothing is less durable: a commit is durable when its WAL frames are fsynced
(``synchronous=FULL``), not when they reach the database file; a crash between a commit
and the next checkpoint recovers the log on the next open (``tests/unit/
test_store_crash.py``). The pauses are recorded, so the benchmark reports them beside
the cycle times instead of hiding them.
"""

from __future__ import annotations

import time
from types import TracebackType

from lyra_ray.runtime.store import StateStore

BACKSTOP_PAGES = 20_000
"""WAL pages (4 KiB) at which a commit checkpoints after all: ~80 MB of log."""
SQLITE_DEFAULT_PAGES = 1000


class PacedCheckpoint:
    """A context in which commits do not checkpoint and :meth:`between` does."""

    def __init__(self, store: StateStore, keep: int = 5000) -> None:
        self.store, self.keep = store, keep
        self.pauses: list[float] = []
        """Seconds of the last ``keep`` checkpoints this pacer ran."""

    def __enter__(self) -> PacedCheckpoint:
        self.store.auto_checkpoint(BACKSTOP_PAGES)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.store.auto_checkpoint(SQLITE_DEFAULT_PAGES)

    def between(self) -> None:
        """Checkpoint what the last cycle's commits wrote."""
        t0 = time.perf_counter()
        self.store.checkpoint()
        self.pauses.append(time.perf_counter() - t0)
        del self.pauses[: -self.keep]
