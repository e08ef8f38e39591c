"""Terminal jobs out of the per-cycle state: their records and the archive that keeps them.

A job that finished, failed or was cancelled takes no part in any further decision, yet
until issue #17 the scheduler rewrote it on every commit, so the per-cycle write grew
with every job ever seen. Now the core hands terminal jobs out
(:meth:`~lyra_ray.scheduling.core.SchedulerCore.take_terminal`), the scheduler turns
each into the record ``status`` shows, and the next commit writes those records to the
store's ``archive`` table in the same transaction as the state without them: a crash
leaves each job either in the state or in the archive, never in neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lyra_ray.model.state import JobState, assignment_to_dict, spec_to_dict
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import SchedulerCore


class RunBook(Protocol):
    """What the archive needs of the runtime: a job's latest generation, and forgetting it."""

    def generation(self, job_id: str) -> int: ...

    def forget(self, job_id: str) -> list[tuple[float, str, int, dict[str, Any]]]: ...


def describe(j: JobState, now: float, generation: int, reason: str | None) -> dict[str, Any]:
    """A job as ``status`` / ``list`` show it."""
    start = j.first_start_s
    end = j.finish_s if j.finish_s is not None else now
    return {
        "id": j.id,
        "name": j.spec.name,
        "user": j.spec.user,
        "status": j.status.value,
        "assignment": assignment_to_dict(j.current),
        "steps_done": j.steps_done,
        "total_steps": j.spec.total_steps,
        "min_workers": j.spec.min_workers,
        "max_workers": j.spec.max_workers,
        "queued_s": (start if start is not None else end) - j.arrival_s,
        "run_s": sum(j.time_received_s.values()),
        "gpu_s": j.attained_service_s,
        "num_preemptions": j.num_preemptions,
        "num_resizes": j.num_resizes,
        "generation": generation,
        "reason": reason,
        "throughput": dict(j.spec.throughput) if j.spec.throughput else None,
    }


class JobArchive:
    """Archived jobs: records handed out but not yet committed, then the store's table.

    The records wait here until a commit succeeds (:meth:`rows` goes into
    :meth:`StateStore.commit`, :meth:`committed` clears them); a failed commit keeps
    them for the next, so a job never leaves both the state and the archive.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.pending: list[tuple[str, dict[str, Any]]] = []

    def add(self, j: JobState, record: dict[str, Any], launches: Sequence[Any] = ()) -> None:
        """Keep ``record`` with the job's spec and its runs' launches beside it."""
        rec = {**record, "spec": spec_to_dict(j.spec), "launches": [list(x) for x in launches]}
        self.pending.append((j.id, rec))

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.pending)

    def committed(self, rows: int) -> None:
        del self.pending[:rows]

    def get(self, job_id: str) -> dict[str, Any] | None:
        for jid, rec in self.pending:
            if jid == job_id:
                return public(rec)
        found = self.store.archived(job_id)
        return public(found) if found is not None else None

    def records(self) -> list[dict[str, Any]]:
        return [public(r) for r in self.store.archive_records()] + [
            public(r) for _, r in self.pending
        ]

    def launches(self) -> list[tuple[float, str, int, dict[str, Any]]]:
        """Every archived job's launches (the audit trail of the runs it had)."""
        recs = [r for r in self.store.archive_records()] + [r for _, r in self.pending]
        return [(float(t), str(j), int(g), a) for r in recs for t, j, g, a in r.get("launches", [])]

    def count(self) -> int:
        return self.store.archive_count() + len(self.pending)


def hand_out_terminal(
    core: SchedulerCore, archive: JobArchive, runtime: RunBook, reasons: dict[str, str]
) -> int:
    """Move the jobs that ended out of the core, and what the runtime and the scheduler
    keep per job, into the archive rows of the next commit; returns how many.

    The scheduler calls this every cycle, before its commit; the bounded-state
    benchmark (``benchmarks/chaos_state.py``) drives the same function.
    """
    ended = core.take_terminal()
    for j in ended:
        record = describe(j, core.now, runtime.generation(j.id), reasons.get(j.id))
        archive.add(j, record, runtime.forget(j.id))
        reasons.pop(j.id, None)
    return len(ended)


def public(record: dict[str, Any]) -> dict[str, Any]:
    """An archived record as ``status`` shows it (without the spec and launches kept beside
    it)."""
    return {k: v for k, v in record.items() if k not in ("spec", "launches")}
