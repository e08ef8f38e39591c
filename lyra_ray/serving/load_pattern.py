"""Request-rate patterns for driving a service: constant, a compressed day, or a spike.

WHY: capacity loaning only shows its worth when serving load moves: servers are lent in the
trough and reclaimed towards the peak. A real day is too long for a demo or a test, so the day
is compressed into ``period_s``. The pattern is pure data plus arithmetic, so that the
simulator and the live load driver (:mod:`lyra_ray.serving.load`) see the very same arrivals
for a seed.

Arrivals are an inhomogeneous Poisson process, drawn by thinning (Lewis and Shedler): draw
candidates at the peak rate and keep each with probability ``rate(t) / peak``. That is exact
for any bounded rate and needs nothing but ``random.Random``, so a seed gives the same list on
every machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Literal

from lyra_ray.serving.checks import finite as _number

Kind = Literal["constant", "diurnal", "spike"]
KINDS: tuple[Kind, ...] = ("constant", "diurnal", "spike")

MAX_RPS = 1e5
"""Above this a Python load driver on loopback measures itself, not the service."""
MAX_DURATION_S = 7 * 24 * 3600.0
"""Longer than a week is a mistake in units, not a load test."""
MAX_REQUESTS = 2_000_000
"""Bound on candidate arrivals (``peak_rps * duration_s``), which bounds time and memory."""


def _in_range(name: str, value: object, low: float, high: float, *, low_open: bool) -> float:
    out = _number(name, value)
    if out < low or (low_open and out == low) or out > high:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return out


@dataclass(frozen=True, kw_only=True)
class LoadPattern:
    """A request rate over ``[0, duration_s)``.

    - ``constant``: ``peak_rps`` throughout.
    - ``diurnal``: ``trough + (peak - trough) * (1 - cos(2 pi t / period_s)) / 2`` with
      ``trough = trough_fraction * peak_rps``: a trough at t = 0 and a peak at ``period_s / 2``.
    - ``spike``: ``trough_fraction * peak_rps``, and ``peak_rps`` during
      ``[spike_at_s, spike_at_s + spike_len_s)``.

    Validated on construction; every refusal is a ValueError naming the field.
    """

    kind: Kind
    peak_rps: float
    duration_s: float
    period_s: float = 60.0
    trough_fraction: float = 0.2
    spike_at_s: float = 0.0
    spike_len_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        peak = _in_range("peak_rps", self.peak_rps, 0.0, MAX_RPS, low_open=True)
        duration = _in_range("duration_s", self.duration_s, 0.0, MAX_DURATION_S, low_open=True)
        _in_range("period_s", self.period_s, 0.0, MAX_DURATION_S, low_open=True)
        _in_range("trough_fraction", self.trough_fraction, 0.0, 1.0, low_open=False)
        spike_at = _in_range("spike_at_s", self.spike_at_s, 0.0, MAX_DURATION_S, low_open=False)
        _in_range("spike_len_s", self.spike_len_s, 0.0, MAX_DURATION_S, low_open=False)
        if self.kind == "spike":
            if self.spike_len_s <= 0:
                raise ValueError(f"spike_len_s must be > 0 for a spike, got {self.spike_len_s!r}")
            if spike_at >= duration:
                raise ValueError(
                    f"spike_at_s ({self.spike_at_s!r}) must be < duration_s ({self.duration_s!r})"
                )
        if peak * duration > MAX_REQUESTS:
            raise ValueError(
                f"peak_rps * duration_s = {peak * duration:.0f} exceeds {MAX_REQUESTS} requests; "
                "lower peak_rps or duration_s"
            )

    @property
    def trough_rps(self) -> float:
        """The base rate of ``diurnal`` and ``spike`` patterns."""
        return self.trough_fraction * self.peak_rps

    def rate_at(self, t: float) -> float:
        """Requests per second at time ``t`` (0 outside ``[0, duration_s)``)."""
        t = _number("t", t)
        if t < 0 or t >= self.duration_s:
            return 0.0
        if self.kind == "constant":
            return float(self.peak_rps)
        trough = self.trough_rps
        if self.kind == "diurnal":
            phase = (1.0 - math.cos(2.0 * math.pi * t / self.period_s)) / 2.0
            return trough + (self.peak_rps - trough) * phase
        in_spike = self.spike_at_s <= t < self.spike_at_s + self.spike_len_s
        return float(self.peak_rps) if in_spike else trough

    def expected_count(self) -> float:
        """The integral of the rate over ``[0, duration_s)``: the mean number of arrivals."""
        d, peak, trough = float(self.duration_s), float(self.peak_rps), self.trough_rps
        if self.kind == "constant":
            return peak * d
        if self.kind == "diurnal":
            w = 2.0 * math.pi / self.period_s
            return trough * d + (peak - trough) * (d / 2.0 - math.sin(w * d) / (2.0 * w))
        overlap = max(0.0, min(d, self.spike_at_s + self.spike_len_s) - self.spike_at_s)
        return trough * d + (peak - trough) * overlap

    def arrival_times(self, seed: int) -> list[float]:
        """Sorted Poisson arrival times in ``[0, duration_s)``, the same for the same seed."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        rng = random.Random(seed)
        peak = float(self.peak_rps)
        out: list[float] = []
        t = 0.0
        while True:
            t += rng.expovariate(peak)
            if t >= self.duration_s:
                return out
            # Always draw, so the stream of random numbers does not depend on the rate.
            if rng.random() * peak < self.rate_at(t):
                out.append(t)

    def to_dict(self) -> dict[str, str | float]:
        """A JSON-safe dict of the fields, for reports."""
        return asdict(self)
