"""Appending one run to a benchmark's results JSON (``{"runs": [...]}``).

Why one place: the suite's CPU benchmarks keep every run, oldest first, so that a docs
table can show them side by side; each used to repeat the read, append and write.
"""

from __future__ import annotations

import json
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
