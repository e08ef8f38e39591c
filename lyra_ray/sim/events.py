"""A small typed event heap: (time, sequence) ordered, so equal times keep insertion order.

The sequence number makes the simulation deterministic: two events at the same virtual
time are always delivered in the order they were scheduled.
"""

from __future__ import annotations

import heapq

from lyra_ray.model import Event


class EventQueue:
    """Entries are ``(time, seq, event)`` tuples: the heap compares them natively (a
    dataclass ordering would run a Python ``__lt__`` per comparison), and ``seq`` is
    unique, so ``event`` itself is never compared."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Event]] = []
        self._seq = 0

    def push(self, time: float, event: Event) -> None:
        heapq.heappush(self._heap, (time, self._seq, event))
        self._seq += 1

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_until(self, time: float) -> list[Event]:
        """All events at or before ``time``, in order."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= time:
            out.append(heapq.heappop(heap)[2])
        return out

    def __len__(self) -> int:
        return len(self._heap)
