"""Requests per second and latency from the counters the serving pool already reads.

The page never asks an ingress itself: an ingress's ``stats()`` restarts the window of
its time-averaged requests in flight, which is what the pool's demand estimate is made
of, so a second reader would change the demand. The pool keeps each ingress's latest
counters (``completed``, ``ongoing_avg``) and the scheduler's overview hands them on;
this turns two readings of them into a rate, and the rate and the requests in flight
into a latency by Little's law (in flight = rate x latency): no Prometheus needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

MIN_SPAN_S = 2.0
"""Readings closer than this are not compared (the page refreshes every few seconds)."""


class ServiceRates:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._prev: dict[str, tuple[float, int]] = {}
        self._last: dict[str, dict[str, float | None]] = {}

    def update(self, name: str, counters: Mapping[str, Any] | None) -> dict[str, float | None]:
        """``{"rps", "latency_ms", "in_flight"}`` for a service (None where unknown)."""
        if not counters or "completed" not in counters:
            return {"rps": None, "latency_ms": None, "in_flight": None}
        now = self.clock()
        done = int(counters["completed"]) + int(counters.get("failed", 0))
        in_flight = float(counters.get("ongoing_avg", counters.get("ongoing", 0.0)))
        prev = self._prev.get(name)
        if prev is None or done < prev[1]:  # first reading, or a restarted ingress
            self._prev[name] = (now, done)
            out: dict[str, float | None] = {"rps": None, "latency_ms": None}
        elif now - prev[0] < MIN_SPAN_S:
            out = dict(self._last.get(name, {"rps": None, "latency_ms": None}))
        else:
            rps = (done - prev[1]) / (now - prev[0])
            self._prev[name] = (now, done)
            lat = 1000.0 * in_flight / rps if rps > 0 else None
            out = {"rps": rps, "latency_ms": lat}
        out["in_flight"] = in_flight
        self._last[name] = out
        return out
