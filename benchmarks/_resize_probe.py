"""The example job, timed from inside its workers, for ``benchmarks/resize_phases.py``.

WHY: a resize's recorded phases (``lyra_ray/runtime/restart_phases.py``) say how long the
new workers took to come up, not where that time went. Each worker of the benchmark's
elastic job runs :func:`train_loop`, the example loop with a :class:`StepLoop` that
stamps its own moments, and appends one JSON line per run to ``config["probe_log"]``:
when its process started, when the loop was called, when the step loop was up, when
the checkpoint was restored, when the first step ended and when the loop returned.
The benchmark joins them with the phase records (:func:`breakdown`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from lyra_ray.jobs import train_example
from lyra_ray.train import StepLoop


def process_start() -> float:
    """This process's start, wall clock (Linux: ``/proc``; to a second: the boot time
    there is whole seconds)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


_RUNS_HERE = [0]
"""Runs of the loop this process has made so far: 0 marks a process new to the job."""


class TimedLoop(StepLoop):
    """A StepLoop that records when it was made, restored, first stepped and ended."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        called = time.time()
        super().__init__(config)
        self.stamps: dict[str, Any] = {
            "generation": self.generation,
            "rank": self.rank,
            "pid": os.getpid(),
            "proc_start": process_start(),
            "earlier_runs": _RUNS_HERE[0],
            "called": called,
            "loop": time.time(),
        }
        _RUNS_HERE[0] += 1

    def restore(self) -> dict[str, Any] | None:
        self.stamps["restore_start"] = time.time()
        state = super().restore()
        self.stamps["restored"] = time.time()
        return state

    def steps(self, state_fn: Callable[[], Mapping[str, Any]]) -> Iterator[int]:
        first = True
        for step in super().steps(state_fn):
            yield step
            if first:
                self.stamps["first_step"] = time.time()
                first = False
        self.stamps["returned"] = time.time()
        where = self.config.get("probe_log")
        if where:
            with open(where, "a") as f:
                f.write(json.dumps(self.stamps) + "\n")


def train_loop(config: dict[str, Any]) -> None:
    """The example job's loop, its StepLoop timed (the module's name for it swapped)."""
    train_example.StepLoop = TimedLoop  # type: ignore[misc]
    train_example.train_loop(config)


def _median(xs: Sequence[float]) -> float | None:
    import statistics

    return round(statistics.median(xs), 3) if xs else None


PARTS = (
    ("loop_end_s", "stop seen → the loop returned (its last checkpoint written)"),
    ("teardown_s", "→ the run ended (Ray Train: its controller noticed, workers stopped)"),
    ("relaunch_s", "→ the next generation started (the scheduler noticed)"),
    ("to_call_s", "→ the loop called in every worker (processes, imports, process group)"),
    ("to_loop_s", "→ the step loop up (its control-actor lookup)"),
    ("to_restored_s", "→ model built and checkpoint restored"),
    ("to_step_s", "→ the first step done"),
)


def breakdown(
    resizes: Sequence[Mapping[str, Any]], stamps: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Each resize's time split at the workers' own moments (the slowest worker of each
    generation: the run steps when all have); medians over the resizes."""
    by_gen: dict[int, list[Mapping[str, Any]]] = {}
    for s in stamps:
        by_gen.setdefault(int(s["generation"]), []).append(s)
    parts: dict[str, list[float]] = {k: [] for k, _ in PARTS}
    cold: list[int] = []
    for r in resizes:
        ph = r["phases"]
        if not all(k in ph for k in ("stop_signal_s", "checkpoint_s", "relaunch_s")):
            continue
        seen = r["at"] + ph["stop_signal_s"]
        ended = seen + ph["checkpoint_s"]
        started = ended + ph["relaunch_s"]
        old, new = by_gen.get(r["generation"] - 1, []), by_gen.get(r["generation"], [])
        if not old or not new or any("first_step" not in s for s in new):
            continue
        returned = max(s["returned"] for s in old)
        parts["loop_end_s"].append(returned - seen)
        parts["teardown_s"].append(ended - returned)
        parts["relaunch_s"].append(ph["relaunch_s"])
        called = max(s["called"] for s in new)
        parts["to_call_s"].append(called - started)
        loop = max(s["loop"] for s in new)
        parts["to_loop_s"].append(loop - called)
        restored = max(s["restored"] for s in new)
        parts["to_restored_s"].append(restored - loop)
        parts["to_step_s"].append(max(s["first_step"] for s in new) - restored)
        cold.append(sum(1 for s in new if s.get("earlier_runs", 0) == 0))
    return {
        "median_s": {k: _median(v) for k, v in parts.items()},
        "labels": dict(PARTS),
        "new_processes_per_resize": cold,
        "resizes": len(cold),
    }
