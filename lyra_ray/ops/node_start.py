"""Starting a node's process (``ray start``) on this host, tried again after the transient
failures Ray reports under load: the host cluster's heads and fixed workers start so."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from lyra_ray.ops.embedded import START_TRIES, is_transient_start_failure
from lyra_ray.ops.process_groups import end_groups

log = logging.getLogger(__name__)


def start_retried(
    argv: list[str],
    env: Mapping[str, str],
    log_path: Path,
    started: Callable[[int], None],
    failed: Callable[[int], None],
) -> bool:
    """Run a node's start command (``ray start``) in a process group of its own, its output
    appended to ``log_path``; ``started(pgid)`` once it runs. True once a try exits 0.

    WHY tried again: Ray gives a new node's raylet a fixed 30 s to register with its GCS,
    and under a one-core CPU hog a fixed worker of the head-recovery test's host cluster
    ran out of it ("The current node timed out during startup", 2026-12-01), failing the
    whole module. A try that fails one of the transient ways the embedded cluster retries
    (:func:`lyra_ray.ops.embedded.is_transient_start_failure`) has its process group ended
    (``failed(pgid)`` forgets it) and is tried again, up to ``START_TRIES`` in all; any
    other failure returns False at once, its group kept for ``down`` to end."""
    for attempt in range(1, START_TRIES + 1):
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
            )
        started(proc.pid)
        if proc.wait(timeout=600) == 0:
            return True
        with open(log_path, "rb") as f:
            f.seek(offset)
            said = f.read().decode(errors="replace")
        if attempt == START_TRIES or not is_transient_start_failure(said):
            return False
        end_groups([proc.pid], grace_s=5.0)
        failed(proc.pid)
        log.warning("a node failed to start (%s); starting it again", said.strip()[-120:])
    return False
