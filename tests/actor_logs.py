"""The tail of a named actor's log, for a failed live test's report.

WHY: a live test that fails by waiting in vain ("timed out waiting for a lend") says
what did not happen, not why. The scheduler actor logs every failed scheduling cycle
(``log.exception("scheduling cycle failed")``) to its worker's ``.err`` file, which
the cluster deletes at shutdown; once, four serving tests in a row waited in vain and
nothing was left to read (docs/testing.md, "Not explained"). Ray marks each actor's
log files with ``:actor_name:<Class>`` on the line it starts at, so the files are found
by that mark, every incarnation of a restarted actor included.
"""

from __future__ import annotations

from pathlib import Path

MARK = ":actor_name:"
MARKERS = (MARK, ":job_id:", ":task_name:")
"""Ray's own marker lines in a worker's log: no news to a reader."""


def actor_log_tails(logs_dir: Path, actor_class: str, lines: int = 40, files: int = 3) -> str:
    """The last ``lines`` lines of the ``files`` newest ``worker-*.err`` files that hold
    ``actor_class``'s mark, newest last; ``""`` when there are none."""
    mark = f"{MARK}{actor_class}\n"
    found: list[tuple[float, Path, list[str]]] = []
    for path in logs_dir.glob("worker-*.err"):
        try:
            text = path.read_text(errors="replace")
            mtime = path.stat().st_mtime
        except OSError:  # a worker's file removed while read: nothing to say about it
            continue
        if mark in text:
            found.append((mtime, path, text.splitlines()))
    found.sort(key=lambda f: f[0])
    parts = []
    for _, path, text in found[-files:]:
        kept = [line for line in text if not line.startswith(MARKERS)][-lines:]
        parts.append(f"--- {path.name} (last {len(kept)} lines) ---\n" + "\n".join(kept))
    return "\n".join(parts)
