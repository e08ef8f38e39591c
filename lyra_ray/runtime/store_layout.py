"""The incremental store's layout (issue #33): what one :meth:`~lyra_ray.runtime.store.
StateStore.commit_delta` writes (:class:`Delta`), and how the rows it wrote reassemble into
the state a whole-state commit would have kept (:func:`assemble`). Kept apart from the
store's SQL so that each file stays one concept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

JOBS_PATH = ("core", "jobs")
"""Where the ``jobs`` table's rows go in the reassembled state (a list sorted by id, as
:meth:`~lyra_ray.scheduling.core.SchedulerCore.to_state` writes it)."""


@dataclass
class Delta:
    """What one incremental commit writes (:meth:`StateStore.commit_delta`).

    ``parts`` are whole values at a dotted path of the state; ``rows`` are entries
    ``(path, key, value)`` of a mapping at a path that is large but changes a few keys at
    a time (the rounds' per-job times); jobs are rows of their own. Values are JSON text.
    """

    jobs: list[tuple[str, str]] = field(default_factory=list)
    """(job id, record) of every new or changed job."""
    new: dict[str, Callable[[], str]] = field(default_factory=dict)
    """Jobs not yet stored: each one's spec as JSON, called only if no inbox row has it."""
    removed: list[str] = field(default_factory=list)
    parts: list[tuple[str, str]] = field(default_factory=list)
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    rows_removed: list[tuple[str, str]] = field(default_factory=list)
    reset: bool = False
    """Drop every stored part and every job not in ``jobs`` first: the writer's first
    commit (it does not know what an earlier process stored)."""


def assemble(
    parts: Sequence[tuple[str, str]],
    rows: Sequence[tuple[str, str, str]],
    jobs: Sequence[tuple[str, str, str]],
) -> dict[str, Any]:
    """The state :meth:`StateStore.commit_delta` wrote, as one dict (deterministic: paths,
    keys and jobs in sorted order, as ``json.dumps(sort_keys=True)`` kept them)."""
    state: dict[str, Any] = {}
    for path, value in sorted(parts, key=lambda p: (p[0].count("."), p[0])):
        _put(state, path.split("."), json.loads(value))
    for path, key, value in sorted(rows):
        *head, last = path.split(".")
        _at(state, head).setdefault(last, {})[key] = json.loads(value)
    listed = [{**json.loads(rec), "id": jid, "spec": json.loads(spec)} for jid, spec, rec in jobs]
    _at(state, list(JOBS_PATH[:-1]))[JOBS_PATH[-1]] = sorted(listed, key=lambda d: d["id"])
    return state


def _at(state: dict[str, Any], path: Sequence[str]) -> dict[str, Any]:
    for p in path:
        state = state.setdefault(p, {})
    return state


def _put(state: dict[str, Any], path: Sequence[str], value: Any) -> None:
    *head, last = path
    _at(state, head)[last] = value
