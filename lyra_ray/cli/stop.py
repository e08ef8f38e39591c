"""``lyra submit --wait`` under ``ray job stop``: the signal cancels the lyra jobs.

A ``ray job submit`` driver is stopped by a signal (SIGTERM by default, then SIGKILL
after ``RAY_JOB_STOP_WAIT_TIME_S``, 3 s): the jobs the driver submitted must not train on
after the Ray job that owns them is gone.
"""

from __future__ import annotations

import sys
from typing import Any


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopSignals:
    """SIGTERM / SIGINT while ``lyra submit --wait`` waits: cancel what it submitted.

    WHY: ``ray job stop`` ends a ``ray job submit`` driver with SIGTERM (SIGKILL 3 s
    later, ``RAY_JOB_STOP_WAIT_TIME_S``); stopping the Ray job must stop the lyra jobs
    it submitted, not leave them training. A signal during the submission itself is
    held until the job ids are known (then they are cancelled), never lost."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.armed = False
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        import signal

        if self.active:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def arm(self) -> None:
        """From now on a signal interrupts the wait; one already received does at once."""
        self.armed = True
        if self.signum is not None:
            raise Stopped(self.signum)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        if self.armed:
            raise Stopped(signum)

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)


def cancel_on_stop(c: Any, ids: list[str], signum: int) -> int:
    from lyra_ray.sdk import TERMINAL

    cancelled = []
    for jid in ids:
        try:
            if c.status(jid)["status"] not in TERMINAL:
                c.cancel(jid)
                cancelled.append(jid)
        except Exception as e:  # a refused token, a scheduler gone: try the others still
            print(f"lyra: could not cancel {jid}: {e}", file=sys.stderr)
    print(f"stopped by signal {signum}: cancelled {len(cancelled)} lyra job(s) {cancelled}")
    return 128 + signum
