"""What the live runtime remembers of one run of a job (its generation, assignment,
phase and restarts); kept with the runtime's state so a restarted scheduler knows its
runs."""

from __future__ import annotations

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
