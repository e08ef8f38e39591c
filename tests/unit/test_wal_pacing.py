"""SQLite's WAL checkpoints run between the live loop's cycles, not inside its commits
(:mod:`lyra_ray.runtime.wal_pacing`): inside the pacer a commit leaves the log to grow,
:meth:`PacedCheckpoint.between` copies it into the database, and what was committed is
kept either way."""

from __future__ import annotations

import json
from pathlib import Path

from lyra_ray.runtime.store import Delta, StateStore
from lyra_ray.runtime.wal_pacing import PacedCheckpoint

PAGE = 4096


def _commit(store: StateStore, tag: str, rows: int = 3000) -> None:
    """~3,000 pages of WAL: past SQLite's 1,000-page automatic checkpoint."""
    value = json.dumps({"tag": tag, "pad": "x" * 3000})
    table = [("core.t", f"{i:06d}", value) for i in range(rows)]
    store.commit_delta(Delta(parts=[("core", "{}")], rows=table))


def _wal_pages(tmp_path: Path) -> int:
    return (tmp_path / "lyra.sqlite-wal").stat().st_size // PAGE


def test_commits_checkpoint_only_between_cycles(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    _commit(store, "a")
    _commit(store, "b")  # SQLite checkpointed after "a": "b" reuses the log from its start
    alone = _wal_pages(tmp_path)
    with PacedCheckpoint(store) as wal:
        _commit(store, "c")
        _commit(store, "d")  # nothing checkpointed "c": the log holds both
        assert _wal_pages(tmp_path) > 1.8 * alone
        wal.between()
        grown = _wal_pages(tmp_path)
        _commit(store, "e")  # checkpointed between: "e" reuses the log from its start
        assert _wal_pages(tmp_path) == grown
    assert len(wal.pauses) == 1 and wal.pauses[0] >= 0.0
    store.close()
    saved = StateStore(tmp_path).load()
    assert saved is not None
    assert {v["tag"] for v in saved["core"]["t"].values()} == {"e"}
