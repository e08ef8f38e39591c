"""What a scheduler's saved state holds, read without touching it (issue #42, item 1).

A restarted scheduler resumes from its state directory: every unfinished job, its
checkpoints, the archive of finished ones. Before anything opens that state for writing
(``lyra up``, before a node starts; the scheduler actor, before its store), it is read
here from a copy, so a state this lyra cannot read, or one written by a newer lyra, is
refused in one line and left exactly as it was: SQLite's own open of a WAL database
writes side files even read-only, and a newer format must not be "upgraded" backwards by
our schema. Everything else is kept, whatever changed (the policy, the nodes): see
:meth:`~lyra_ray.scheduling.decider.Decider.load_state` and ``docs/reliability.md``.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.runtime.store import STATE_FORMAT, StateStore

DB = "lyra.sqlite"


class SavedStateError(InputError):
    """A saved state lyra will not resume from: unreadable, or from a newer lyra. The
    message is one line, and says that nothing was changed (the CLI prints it as any
    refused input, exit code 2)."""


@dataclass(frozen=True)
class SavedSummary:
    """What a saved state will bring back, for the line ``lyra up`` prints."""

    path: str
    format: int
    policy: str | None
    """The policy the state was saved under (None: saved before lyra kept its name)."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Unfinished jobs by status (queued, running, preempted, ...)."""
    archived: int = 0
    nodes: int = 0
    services: tuple[str, ...] = ()

    @property
    def unfinished(self) -> int:
        return sum(self.statuses.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "policy": self.policy,
            "statuses": dict(self.statuses),
            "unfinished": self.unfinished,
            "archived": self.archived,
            "nodes": self.nodes,
            "services": list(self.services),
        }


def inspect_saved(state_dir: str | Path) -> SavedSummary | None:
    """The saved state under ``state_dir``, or None if there is none; raises
    :class:`SavedStateError` if lyra cannot resume from it. Reads a copy: the files under
    ``state_dir`` are never opened."""
    src = Path(state_dir) / DB
    if not src.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="lyra-state-check-") as tmp:
        for suffix in ("", "-wal"):  # the WAL holds the commits not yet checkpointed
            if Path(f"{src}{suffix}").is_file():
                shutil.copyfile(f"{src}{suffix}", Path(tmp) / f"{DB}{suffix}")
        try:
            return _summarise(src, StateStore(tmp))
        except SavedStateError:
            raise
        except (sqlite3.Error, ValueError, KeyError, TypeError, AttributeError) as e:
            why = " ".join(f"{type(e).__name__}: {e}".split())[:200]
            raise SavedStateError(
                f"{src}: the saved scheduler state cannot be read ({why}); nothing was "
                "changed: restore the file, or start afresh with --fresh or another --dir"
            ) from None


def _summarise(src: Path, store: StateStore) -> SavedSummary | None:
    try:
        fmt = store.format()
        if fmt > STATE_FORMAT:
            raise SavedStateError(
                f"{src}: the saved scheduler state is format {fmt}, written by a newer lyra "
                f"(this one reads up to format {STATE_FORMAT}); nothing was changed: "
                "upgrade lyra, or start afresh with --fresh or another --dir"
            )
        saved = store.load()
        archived = store.archive_count()
    finally:
        store.close()
    if saved is None:  # a store that never committed a cycle (or an empty file)
        return SavedSummary(str(src), fmt, None, archived=archived) if archived else None
    core = saved["core"]
    statuses = Counter(str(j["status"]) for j in core["jobs"])
    services = tuple(sorted((saved.get("serving") or {}).get("services") or {}))
    return SavedSummary(
        path=str(src),
        format=fmt,
        policy=core.get("policy_name"),
        statuses=dict(sorted(statuses.items())),
        archived=archived,
        nodes=len(core["nodes"]),
        services=services,
    )


def describe(summary: SavedSummary, policy: str) -> str:
    """One line: what a scheduler started with ``policy`` resumes from ``summary``."""
    jobs = ", ".join(f"{n} {s}" for s, n in summary.statuses.items()) or "no unfinished job"
    parts = [f"resuming from {summary.path}: {jobs}"]
    if summary.archived:
        parts.append(f"{summary.archived} ended in the archive")
    if summary.services:
        parts.append(f"service(s) {', '.join(summary.services)} deployed again")
    if summary.policy is not None and summary.policy != policy:
        parts.append(
            f"the policy changed from {summary.policy} to {policy}: only its own saved "
            "state is dropped"
        )
    return "; ".join(parts)
