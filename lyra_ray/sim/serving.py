"""Inference demand over time, in servers: from a CSV trace, a request-rate series or a
seeded diurnal curve.

Lyra's premise is that the inference pool is sized for its daily peak and idles much of
the day (the paper's production cluster: low mean utilisation, a strong diurnal swing).
The simulator turns a demand series into :class:`~lyra_ray.model.ServingDemand` events;
the policy lends what serving does not need.

CSV format (header required)::

    time_s,servers
    0,12
    3600,9

A request-rate series (ServeGen's ``ts_s,rate_rps[,...]``: extra columns are ignored)
becomes servers busy by a per-server capacity the user states, in requests per second:
``ceil(rate / capacity)`` from each point on (serving never gets fewer servers than its
load needs). Several series (one per served model) on one pool add their servers.
``--serving-demand`` names them as ``FILE@CAPACITY[,FILE@CAPACITY...]``
(:func:`parse_demand_spec`).
"""

from __future__ import annotations

import csv
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lyra_ray.model import ServingDemand
from lyra_ray.model.errors import InputError

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class DemandPoint:
    """From ``time_s`` on, serving needs ``servers`` servers."""

    time_s: float
    servers: int


def read_demand_csv(path: str | Path) -> list[DemandPoint]:
    """Read ``time_s,servers`` rows; errors name the file, line and field."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"{p}: cannot read serving demand trace: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: cannot read serving demand trace: not UTF-8 ({e.reason})") from None
    rows = csv.reader(text.splitlines())
    header = next(rows, None)
    if header is None or [h.strip() for h in header] != ["time_s", "servers"]:
        raise InputError(f"{p}: line 1: header must be 'time_s,servers', got {header!r}")
    out: list[DemandPoint] = []
    for lineno, row in enumerate(rows, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 2:
            raise InputError(
                f"{p}: line {lineno}: expected 2 fields (time_s,servers), got {len(row)}"
            )
        try:
            t = float(row[0])
        except ValueError:
            raise InputError(
                f"{p}: line {lineno}: field 'time_s': not a number: {row[0]!r}"
            ) from None
        try:
            s = int(row[1])
        except ValueError:
            raise InputError(
                f"{p}: line {lineno}: field 'servers': not an integer: {row[1]!r}"
            ) from None
        if not math.isfinite(t) or t < 0:
            raise InputError(f"{p}: line {lineno}: field 'time_s': must be >= 0, got {row[0]!r}")
        if s < 0:
            raise InputError(f"{p}: line {lineno}: field 'servers': must be >= 0, got {s}")
        if out and t < out[-1].time_s:
            raise InputError(
                f"{p}: line {lineno}: field 'time_s': {t} goes back in time "
                f"(after {out[-1].time_s})"
            )
        out.append(DemandPoint(t, s))
    return out


def diurnal(
    total_servers: int,
    horizon_s: float,
    *,
    step_s: float = 900.0,
    mean_util: float = 0.4,
    amplitude: float = 0.3,
    noise: float = 0.05,
    period_s: float = DAY_S,
    peak_s: float = 14 * 3600.0,
    seed: int = 0,
) -> list[DemandPoint]:
    """A daily sine around ``mean_util`` of the pool, peaking at ``peak_s``, plus noise.

    Utilisation (fraction of ``total_servers``) is ``mean_util + amplitude * cos(...)``
    plus Gaussian noise of std ``noise``, clipped to [0, 1], rounded up to servers (serving
    never gets fewer servers than its load needs), one point every ``step_s``. The same
    seed gives the same series.
    """
    if total_servers < 0 or horizon_s < 0 or step_s <= 0:
        raise ValueError("total_servers, horizon_s must be >= 0 and step_s > 0")
    rnd = random.Random(seed)
    out: list[DemandPoint] = []
    t = 0.0
    while t <= horizon_s:
        u = mean_util + amplitude * math.cos(2 * math.pi * (t - peak_s) / period_s)
        u = min(1.0, max(0.0, u + rnd.gauss(0.0, noise)))
        out.append(DemandPoint(t, min(total_servers, math.ceil(u * total_servers - 1e-9))))
        t += step_s
    return out


def demand_events(points: Sequence[DemandPoint]) -> list[tuple[float, ServingDemand]]:
    """The points where demand changes, as timed :class:`ServingDemand` events."""
    out: list[tuple[float, ServingDemand]] = []
    last: int | None = None
    for p in points:
        if p.servers != last:
            out.append((p.time_s, ServingDemand(p.servers)))
            last = p.servers
    return out


def demand_series(points: Sequence[DemandPoint]) -> list[tuple[float, int]]:
    """The ``(time_s, servers)`` changes that :class:`~lyra_ray.sim.simulator.Simulator`
    takes as ``serving_demand``."""
    return [(t, e.servers) for t, e in demand_events(points)]


def mean_utilisation(points: Sequence[DemandPoint], total_servers: int) -> float:
    """Time-weighted mean demand / pool size over the series (last point: one step)."""
    if len(points) < 2 or total_servers <= 0:
        return 0.0
    span = points[-1].time_s - points[0].time_s
    acc = sum(a.servers * (b.time_s - a.time_s) for a, b in itertools.pairwise(points))
    return acc / span / total_servers if span > 0 else 0.0


@dataclass(frozen=True, slots=True)
class RatePoint:
    """From ``time_s`` on, requests arrive at ``rate_rps`` per second."""

    time_s: float
    rate_rps: float


RATE_FIELDS = ("ts_s", "rate_rps")
MAX_CAPACITY_RPS = 1e9


def read_rate_csv(path: str | Path) -> list[RatePoint]:
    """A request-rate series (header with ``ts_s`` and ``rate_rps``); errors name the
    file, the line and the field."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"{p}: cannot read request-rate series: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: cannot read request-rate series: not UTF-8 ({e.reason})") from None
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader, [])]
    if not set(RATE_FIELDS) <= set(header):
        raise InputError(f"{p}: line 1: header must contain 'ts_s' and 'rate_rps', got {header!r}")
    ti, ri = header.index("ts_s"), header.index("rate_rps")
    out: list[RatePoint] = []
    for ln, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{p}: line {ln}: expected {len(header)} fields, got {len(row)}")
        values = []
        for name, raw in (("ts_s", row[ti]), ("rate_rps", row[ri])):
            try:
                v = float(raw)
            except ValueError:
                raise InputError(f"{p}: line {ln}: field '{name}': not a number: {raw!r}") from None
            if not math.isfinite(v) or v < 0:
                raise InputError(
                    f"{p}: line {ln}: field '{name}': must be a finite number >= 0, got {raw!r}"
                )
            values.append(v)
        t, r = values
        if out and t <= out[-1].time_s:
            raise InputError(
                f"{p}: line {ln}: field 'ts_s': {t:g} does not come after {out[-1].time_s:g}"
            )
        out.append(RatePoint(t, r))
    if not out:
        raise InputError(f"{p}: no rows")
    return out


def servers_for(points: Sequence[RatePoint], capacity_rps: float) -> list[DemandPoint]:
    """Servers busy from each point on: ``ceil(rate / capacity)``."""
    if not math.isfinite(capacity_rps) or not 0 < capacity_rps <= MAX_CAPACITY_RPS:
        raise ValueError(f"capacity must be in (0, {MAX_CAPACITY_RPS:g}] req/s, got {capacity_rps}")
    return [DemandPoint(p.time_s, math.ceil(p.rate_rps / capacity_rps - 1e-9)) for p in points]


def add_series(series: Sequence[Sequence[DemandPoint]]) -> list[DemandPoint]:
    """Several demands on one pool: at every instant, the sum of each one in force."""
    times = sorted({p.time_s for s in series for p in s})
    out: list[DemandPoint] = []
    idx = [0] * len(series)
    for t in times:
        total = 0
        for k, s in enumerate(series):
            while idx[k] + 1 < len(s) and s[idx[k] + 1].time_s <= t:
                idx[k] += 1
            if s and s[idx[k]].time_s <= t:
                total += s[idx[k]].servers
        out.append(DemandPoint(t, total))
    return out


def parse_demand_spec(spec: str, flag: str = "--serving-demand") -> list[DemandPoint]:
    """``FILE`` (``time_s,servers``) or ``FILE@CAPACITY[,FILE@CAPACITY...]``
    (request-rate series, each at its per-server capacity in req/s, added up)."""
    items = [s.strip() for s in spec.split(",")]
    if any(not s for s in items):
        raise InputError(f"{flag}: an empty item in {spec!r}")
    if len(items) == 1 and "@" not in items[0]:
        path = items[0]
        try:
            with open(path) as fh:
                head = fh.readline()
        except OSError as e:
            raise InputError(f"{flag}: {path}: cannot read: {e.strerror}") from None
        except UnicodeDecodeError:
            head = ""
        if "rate_rps" in head:
            raise InputError(
                f"{flag}: {path} is a request-rate series; give one server's capacity in "
                f"req/s as {path}@CAPACITY"
            )
        return read_demand_csv(path)
    series = []
    for item in items:
        path, sep, raw = item.rpartition("@")
        if not sep or not path:
            raise InputError(f"{flag}: expected FILE@CAPACITY (req/s per server), got {item!r}")
        try:
            cap = float(raw)
        except ValueError:
            raise InputError(f"{flag}: capacity of {path}: not a number: {raw!r}") from None
        if not math.isfinite(cap) or not 0 < cap <= MAX_CAPACITY_RPS:
            raise InputError(
                f"{flag}: capacity of {path}: must be in (0, {MAX_CAPACITY_RPS:g}] req/s, "
                f"got {raw!r}"
            )
        series.append(servers_for(read_rate_csv(path), cap))
    return add_series(series)
