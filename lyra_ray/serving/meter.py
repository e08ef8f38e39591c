"""What an ingress counts: requests in flight over time, and how requests ended.

Every kind of service ingress (dense, MoE) reports the same numbers, because the serving
pool turns them into demand the same way: the time-averaged number of requests in
flight, as Serve's own autoscaler averages it (an instant's count is mostly noise).
"""

from __future__ import annotations

import time
from typing import Any


class RequestMeter:
    def __init__(self) -> None:
        self.ongoing = 0
        self.completed = 0
        self.failed = 0
        self.rejected = 0
        self._area = 0.0
        """Integral of the requests in flight over time since the last :meth:`stats`."""
        self._last = self._window = time.monotonic()

    def _tally(self) -> None:
        now = time.monotonic()
        self._area += self.ongoing * (now - self._last)
        self._last = now

    def begin(self) -> None:
        self._tally()
        self.ongoing += 1

    def end(self, ok: bool) -> None:
        self._tally()
        self.ongoing -= 1
        if ok:
            self.completed += 1
        else:
            self.failed += 1

    def reject(self) -> None:
        self.rejected += 1

    def stats(self) -> dict[str, Any]:
        """Counters, and the time-averaged requests in flight since the last call."""
        self._tally()
        span = self._last - self._window
        avg = self._area / span if span > 0 else float(self.ongoing)
        self._area, self._window = 0.0, self._last
        return {
            "ongoing_avg": avg,
            "ongoing": self.ongoing,
            "completed": self.completed,
            "failed": self.failed,
            "rejected": self.rejected,
        }
