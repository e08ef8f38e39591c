"""The planner ranking's quiet gate (``test_planner_pipeline.py``): whether both pipeline
workers, computing at once, each have a core of their own at full speed, so that a step
timed then measures the schedule and not time-slicing or a slow spell of the host."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import ray

T = TypeVar("T")

SLOWDOWN = 1.2
"""How much slower than its CPU time, than its twin, and than the host's typical rate a
worker's computation may run and the host still count as quiet: a live Ray cluster
idling beside the test costs ~10 %, alike for every configuration, which moves neither
the ranking nor the bubble much. The rate catches what CPU time cannot: a worker running
slower with its core still its own (a neighbour on a shared VM's host, or one worker's
memory behaving unlike its twin's; see ``pipeline_stage.keep_freed_memory``), which can misrank
configurations: CI once measured the balanced 1F1B split 4 % slower than the even one it
is predicted to beat by 12 %."""


class HostBusy(Exception):
    """Other processes took the workers' cores: step times would measure time-slicing."""


class Quiet:
    """Tells whether both workers, computing at once, each get (almost) a whole core at
    full speed: wall time at most ``SLOWDOWN`` times CPU time, the two rates within
    ``SLOWDOWN`` of each other, and each at least the host's typical rate over
    ``SLOWDOWN``. Waits for that at most ``budget_s`` seconds."""

    def __init__(self, workers: list[Any], budget_s: float = 150.0) -> None:
        self.workers, self.left = workers, budget_s
        self.rates: list[float] = []
        self.last = [(0.0, 0.0)]

    @property
    def typical(self) -> float:
        """The host's typical rate: the median of every rate seen with the core to itself,
        either worker's (both run the same work on alike cores, and a worker slow from its
        first probe on has no rate of its own to compare with; a time-sliced probe's rate
        is the host's load, not its speed, and is left out).

        Why not the best one seen, as before: this VM's cores themselves run at varying
        speed. A run alone, nothing beside it, logged every probe: the workers' rates ranged
        175-300/s (median 266) at 1.0-1.1x their CPU time. The best probe is the tail of
        that spread and only rises as the test goes on, so the bar it set (250/s by the end)
        refused 61 of 185 probes, every one of them on the rate alone; each refusal before a
        step spent 2 s of the 150-s budget, and two runs of three alone skipped. Against the
        median (222/s) the same probes would have been refused 11 times, the slow spells
        (175-220/s) still among them. What the steps' minima need is kept: a step counts
        only with both workers at full, like speed, and each configuration's time is its
        fastest step over the passes, so a step taken a little slow is outrun by that
        configuration's other passes."""
        return statistics.median(self.rates) if self.rates else 0.0

    def now(self, seconds: float = 0.1) -> bool:
        self.last = ray.get([w.spin.remote(seconds) for w in self.workers])
        rates = [rate for _, rate in self.last]
        self.rates += [rate for ratio, rate in self.last if ratio <= SLOWDOWN]
        return (
            all(ratio <= SLOWDOWN for ratio, _ in self.last)
            and max(rates) <= SLOWDOWN * min(rates)
            and min(rates) * SLOWDOWN >= self.typical
        )

    def wait(self) -> None:
        while not self.now():
            if self.left <= 0:
                seen = ", ".join(f"{r:.0f}/s at {x:.2f}x CPU time" for x, r in self.last)
                raise HostBusy(
                    f"the host stayed busy: two workers could not each get a core at full speed "
                    f"(typical rate {self.typical:.0f}/s; last probe: {seen})"
                )
            time.sleep(2.0)  # probe rarely: the probe itself loads the host
            self.left -= 2.0

    def samples(self, n: int, take: Callable[[], T]) -> list[T]:
        """``n`` results of ``take()``, each counted, as a step is, only if the host was
        quiet just before and just after it."""
        out: list[T] = []
        while len(out) < n:
            self.wait()
            got = take()
            if self.now():
                out.append(got)
        return out
