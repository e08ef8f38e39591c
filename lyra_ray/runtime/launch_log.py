"""The runtime's audit trail: each job's generations, every run started, every gap.

Why its own owner: the runs table (:class:`~lyra_ray.runtime.ray_runtime.RayRuntime`)
says what runs now; this says what ran. Generation numbers must never be reused (a
run's checkpoints and the control actor's records are keyed by them), the launches are
what ``lyra launches`` and the archive show, and the gaps (a stop request to the next
run's start) are what ``stats`` reports per preempt or resize. All of it is saved with
the runtime's state, under the keys it always had, so a restarted scheduler goes on
counting where the last one stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Launch = tuple[float, str, int, dict[str, Any]]
"""(wall time, job, generation, assignment) of one run started."""

GAPS_KEPT = 200
"""Gaps saved with the state (the newest): enough for ``stats``, bounded for the store."""


class LaunchLog:
    """Generations, launches and stop-to-start gaps of the jobs not yet archived."""

    def __init__(self) -> None:
        self.generations: dict[str, int] = {}
        self.launches: list[Launch] = []
        """Every run started of a job not yet archived (:meth:`forget` hands a job's
        entries to the archive)."""
        self.stop_requested_at: dict[str, float] = {}
        self.gaps: list[dict[str, Any]] = []
        """Per preempt/resize: seconds from the stop request to the next run's start."""

    def generation(self, job_id: str) -> int:
        """The job's latest generation (0: never started)."""
        return self.generations.get(job_id, 0)

    def next_generation(self, job_id: str) -> int:
        gen = self.generations.get(job_id, 0) + 1
        self.generations[job_id] = gen
        return gen

    def stop_requested(self, job_id: str, at: float) -> None:
        self.stop_requested_at[job_id] = at

    def launched(self, now: float, job_id: str, gen: int, assignment: dict[str, Any]) -> None:
        """A run started; closes the gap of the stop that preceded it, if any."""
        asked = self.stop_requested_at.pop(job_id, None)
        if asked is not None:
            self.gaps.append({"job_id": job_id, "generation": gen, "gap_s": now - asked})
        self.launches.append((now, job_id, gen, assignment))

    def take(self, job_id: str, gen: int) -> None:
        """A run of generation ``gen`` exists that this log never launched (started by
        a scheduler that died before it committed): the number is used."""
        self.generations[job_id] = gen

    def adopted(self, now: float, job_id: str, gen: int, assignment: dict[str, Any]) -> None:
        """Such a run is kept as this job's run: recorded as launched (no gap: the stop
        before it, if any, was asked by the scheduler that died)."""
        self.launches.append((now, job_id, gen, assignment))

    def forget(self, job_id: str) -> list[Launch]:
        """Drop the job (it is archived, never runs again, so its generation numbers
        cannot be reused); returns its launches for the archive."""
        self.generations.pop(job_id, None)
        self.stop_requested_at.pop(job_id, None)
        mine = [x for x in self.launches if x[1] == job_id]
        if mine:
            self.launches = [x for x in self.launches if x[1] != job_id]
        return mine

    def to_state(self) -> dict[str, Any]:
        return {
            "generations": dict(sorted(self.generations.items())),
            "launches": self.launches,
            "gaps": self.gaps[-GAPS_KEPT:],
            "stop_requested_at": dict(sorted(self.stop_requested_at.items())),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.generations = dict(state.get("generations", {}))
        self.launches = [tuple(x) for x in state.get("launches", [])]
        self.gaps = list(state.get("gaps", []))
        self.stop_requested_at = dict(state.get("stop_requested_at", {}))
