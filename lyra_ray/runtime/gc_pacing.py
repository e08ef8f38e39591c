"""Python's cycle collector, run between scheduling cycles instead of inside them.

WHY: with 10,000 queued jobs the scheduler's heap holds a few hundred thousand objects,
and CPython's automatic collector starts a full (generation 2) collection whenever an
allocation happens to cross its threshold, which is usually in the middle of a cycle,
because a cycle is where the allocations are. One such pause took 100-200 ms on this
project's 2-core hosts (``benchmarks/scale_cycle.py``), twice a cycle's own work: the
cycle's p99 was the collector's. A latency-bound loop with idle time between its steps
(the live loop waits up to its poll period between cycles) can move that pause into the
idle time, as game loops and some web servers do: automatic collection is off while the
loop runs, the young generations are collected after every cycle (cheap: they hold what
one cycle allocated) and the whole heap at most every ``full_every_s``.

Nothing is freed later than it would be by reference counting (which is not paused);
only garbage in reference cycles waits, for at most one cycle (young) or
``full_every_s`` (objects that survived a young collection). The pauses are recorded so
the benchmark reports them beside the cycle times instead of hiding them.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType


class PacedGC:
    """A context in which automatic collection is off and :meth:`between` collects."""

    def __init__(self, full_every_s: float = 60.0, keep: int = 5000) -> None:
        if not full_every_s > 0:
            raise ValueError(f"full_every_s must be > 0, got {full_every_s!r}")
        self.full_every_s = full_every_s
        self.keep = keep
        self.pauses: list[tuple[int, float]] = []
        """(generation, seconds) of the last ``keep`` collections this pacer ran."""
        self._was_enabled = False
        self._last_full = time.monotonic()

    def __enter__(self) -> PacedGC:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._last_full = time.monotonic()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._was_enabled:
            gc.enable()

    def between(self) -> None:
        """Collect what the last cycle left: the young generations, or everything when
        the last full collection is ``full_every_s`` old."""
        now = time.monotonic()
        generation = 2 if now - self._last_full >= self.full_every_s else 1
        t0 = time.perf_counter()
        gc.collect(generation)
        self.pauses.append((generation, time.perf_counter() - t0))
        del self.pauses[: -self.keep]
        if generation == 2:
            self._last_full = now
