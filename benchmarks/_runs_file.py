"""Appending one run to a benchmark's results JSON (``{"runs": [...]}``), and what every
such run starts with.

Why one place: the suite's CPU benchmarks keep every run, oldest first, so that a docs
table can show them side by side; each used to repeat the read, append and write, and
the side-by-side ones their run's header and ``--rounds`` check.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def append_run(path: Path, run: dict[str, Any]) -> None:
    """Adds ``run`` after the runs already in ``path`` (created with its folder if new)."""
    old: dict[str, Any] = {"runs": []}
    if path.exists():
        old = json.loads(path.read_text())
    old["runs"].append(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old, indent=1) + "\n")


def new_run(note: str) -> dict[str, Any]:
    """What every run of a side-by-side benchmark starts with: when, at which commit, what
    ran beside it, and one core's speed (``suite_cpu.calibration_s``), so that runs on
    different hosts compare."""
    from benchmarks.suite_cpu import _commit, calibration_s

    calib = calibration_s()
    return {
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "note": note,
        "calibration_s": round(calib, 3),
    }


def rounds_type(most: int) -> Callable[[str], int]:
    """An argparse type for ``--rounds``: a whole number from 1 to ``most``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a whole number of rounds, got {text!r}") from None
        if not 1 <= n <= most:
            raise argparse.ArgumentTypeError(f"1 to {most} rounds, got {n}")
        return n

    return parse
