"""What the live runtime remembers of one run of a job (its generation, assignment,
phase and restarts); kept with the runtime's state so a restarted scheduler knows its
runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_UNEXPECTED_ENDS = 3
"""Restarts from checkpoint of a run that crashed or vanished, before its job fails."""
START_GRACE_S = 20.0
"""A run actor may take this long to appear after start_run() before it counts as lost."""
STARTING_KILL_S = 180.0
"""A stop meets a run still starting: wait this long from its launch before killing it."""


@dataclass
class RunRecord:
    job_id: str
    generation: int
    assignment: dict[str, Any]
    launched_at: float
    phase: str = "running"  # running | stopping
    deadline: float = 0.0
    next_assignment: dict[str, Any] | None = None
    reported_steps: float = 0.0
    unexpected_ends: int = 0
    executor: str = "ray_train"
    """Which executor carries the run out (``lyra_ray.runtime.run_request.EXECUTORS``);
    a record saved before there were two has no field: its run is a Ray Train run."""

    def kill_after(self, rec: Mapping[str, Any] | None) -> float:
        """When this run, stopping, is killed: after the grace period, or, while its
        workers have not reached the step loop, not before its start-up grace is over."""
        if (rec or {}).get("workers"):
            return self.deadline
        return max(self.deadline, self.launched_at + STARTING_KILL_S)
