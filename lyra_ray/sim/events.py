"""A small typed event heap: (time, sequence) ordered, so equal times keep insertion order.

The sequence number makes the simulation deterministic: two events at the same virtual
time are always delivered in the order they were scheduled.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from lyra_ray.model import Event


@dataclass(order=True, slots=True)
class _Entry:
    time: float
    seq: int
    event: Event = field(compare=False)


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._seq = 0

    def push(self, time: float, event: Event) -> None:
        heapq.heappush(self._heap, _Entry(time, self._seq, event))
        self._seq += 1

    def peek_time(self) -> float | None:
        return self._heap[0].time if self._heap else None

    def pop_until(self, time: float) -> list[Event]:
        """All events at or before ``time``, in order."""
        out = []
        while self._heap and self._heap[0].time <= time:
            out.append(heapq.heappop(self._heap).event)
        return out

    def __len__(self) -> int:
        return len(self._heap)
