"""When a throughput measurement is done: warm up, then repeat windows until two agree.

Why windows and not one long run: the H200 measurements' first 3-s window read 10-25 %
low (the GPU had not been busy), and single windows differ by 7-22 %. A profiler that
took one pass would bake that into every decision. Pure: the caller passes the clock.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MeterSettings:
    warmup_s: float = 3.0
    """Stepped before any window counts (compilation, allocator, clocks ramping up)."""
    window_s: float = 3.0
    tolerance: float = 0.05
    """Two consecutive windows agree when they differ by at most this share."""
    max_windows: int = 8
    """Then the measurement ends unconverged and reports the spread it got."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "warmup_s": self.warmup_s,
            "window_s": self.window_s,
            "tolerance": self.tolerance,
            "max_windows": self.max_windows,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MeterSettings:
        return cls(**raw)

    @property
    def cap_s(self) -> float:
        """The longest a converging measurement can step (with one slow step of slack)."""
        return self.warmup_s + (self.max_windows + 1) * self.window_s


@dataclass
class Meter:
    """Fed ``(now, steps so far)`` after every step; :attr:`done` says when to stop."""

    settings: MeterSettings = field(default_factory=MeterSettings)
    rates: list[float] = field(default_factory=list)
    _start: float | None = None
    _window: tuple[float, int] | None = None

    def tick(self, now: float, steps: int) -> None:
        if self.done:
            return
        if self._start is None:
            self._start = now
            return
        if self._window is None:
            if now - self._start >= self.settings.warmup_s:
                self._window = (now, steps)
            return
        t0, s0 = self._window
        if now - t0 >= self.settings.window_s and steps > s0:
            self.rates.append((steps - s0) / (now - t0))
            self._window = (now, steps)

    @property
    def converged(self) -> bool:
        if len(self.rates) < 2:
            return False
        a, b = self.rates[-2:]
        return abs(a - b) <= self.settings.tolerance * max(a, b)

    @property
    def done(self) -> bool:
        return self.converged or len(self.rates) >= self.settings.max_windows

    def result(self) -> dict[str, Any]:
        """``rate`` (steps/s: the mean of the two agreeing windows, else the median of
        all), ``spread`` ((max - min) / median over every window), ``windows``,
        ``converged``. No window at all is a rate of 0 with ``converged`` false."""
        if not self.rates:
            return {"rate": 0.0, "spread": None, "windows": [], "converged": False}
        med = statistics.median(self.rates)
        rate = statistics.fmean(self.rates[-2:]) if self.converged else med
        spread = (max(self.rates) - min(self.rates)) / med if med > 0 else 0.0
        return {
            "rate": rate,
            "spread": round(spread, 4),
            "windows": [round(r, 4) for r in self.rates],
            "converged": self.converged,
        }
