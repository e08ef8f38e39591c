"""The live tests' one way to wait for a condition, and a log of what each wait cost.

WHY: the live tiers are nearly all of ``make test``'s time (issue 47), and most of a
live test's time is spent waiting for the cluster: a job's steps, a lend, a reclaim.
pytest's duration report says which test is slow, not which wait inside it; with
``LYRA_WAIT_LOG=FILE`` every wait appends one JSON line (the test, what it waited for,
seconds, whether it was met), so the slow waits can be found and sized by their event
rather than guessed at. Without the variable nothing is written.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(pred: Callable[[], T], timeout: float, what: str, every: float = 0.5) -> T:
    """Poll ``pred`` every ``every`` seconds until it returns something truthy (returned),
    or fail after ``timeout`` seconds naming ``what``."""
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            _log(what, time.monotonic() - start, met=True)
            return got
        time.sleep(every)
    _log(what, time.monotonic() - start, met=False)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _log(what: str, seconds: float, met: bool) -> None:
    path = os.environ.get("LYRA_WAIT_LOG")
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    line: dict[str, Any] = {"test": test, "what": what, "s": round(seconds, 2), "met": met}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
