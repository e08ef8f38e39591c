"""How a run that ended badly is told apart: the job's own code raised (``failed``: a
rerun would raise again) or anything else (``crashed``: a rerun from the checkpoint may
well work). One wording for both executors, so ``lyra status`` reads the same."""

from __future__ import annotations

import re
from typing import Any

import ray


def first_line(e: BaseException | str) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def code_failure(rank: int, what: str) -> str:
    """The reason of a run whose loop raised on ``rank`` (``what``: ``Type: message``)."""
    return f"the job's code raised on worker rank {rank}: {what}"[:500]


def crash_line(rank: int, e: BaseException) -> str:
    text = str(e)
    if "worker process has died" in text or "actor died" in text:
        pid = re.search(r"\bpid[=:]\s*(\d+)", text)
        kind = re.search(r"Worker exit type: (\w+)", text)
        return (
            f"Train worker process died (rank {rank}"
            + (f", pid {pid.group(1)}" if pid else "")
            + (f", exit type {kind.group(1)}" if kind else "")
            + ")"
        )
    return f"Train worker rank {rank} failed: {type(e).__name__}: {first_line(e)}"


def failure(e: BaseException) -> tuple[str, str]:
    """(outcome, one-line reason) of a ``TorchTrainer.fit()`` that raised.

    Ray 2.60's ``WorkerGroupError.worker_failures`` holds, per rank, the user's own
    exception (unwrapped) or one of Ray's (a Train or core error) for anything else.
    """
    from ray.train.v2._internal.exceptions import RayTrainError, UserExceptionWithTraceback

    failures: Any = getattr(e, "worker_failures", None)
    if isinstance(failures, dict) and failures:
        errors = {
            rank: x._base_exc if isinstance(x, UserExceptionWithTraceback) else x
            for rank, x in failures.items()
        }
        if not any(isinstance(x, RayTrainError | ray.exceptions.RayError) for x in errors.values()):
            rank, first = min(errors.items())
            return "failed", code_failure(rank, f"{type(first).__name__}: {first_line(first)}")
        parts = [crash_line(rank, x) for rank, x in sorted(errors.items())]
        return "crashed", "; ".join(parts)[:500]
    return "crashed", f"the run failed: {type(e).__name__}: {first_line(e)}"[:500]
