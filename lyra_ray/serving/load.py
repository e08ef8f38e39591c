"""Open-loop HTTP load driver: sends a :class:`LoadPattern`'s arrivals to a loopback service.

WHY open loop: each request leaves at its own arrival time whether or not earlier ones have
answered, as real users do. A closed loop (send the next request when one answers) slows down
exactly when the service does, hides its queueing and so under-states the demand that
capacity loaning must react to. For the same reason a latency is measured from the request's
*scheduled* time, so that any lag in sending counts against it (no coordinated omission).

Only loopback addresses are accepted: this workplace forbids traffic to other hosts, and a
load driver pointed at the wrong URL is a denial-of-service tool. Redirects are not followed
and proxy settings from the environment are ignored for the same reason.

The run is bounded: every request has ``timeout_s``, and whatever is still open at
``duration_s + timeout_s`` (plus a short grace) is abandoned and counted as ``deadline``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from lyra_ray.serving.load_pattern import LoadPattern

logger = logging.getLogger(__name__)

_GRACE_S = 1.0
_MAX_TIMEOUT_S = 600.0
_MAX_CONNECTIONS = 512
_PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True)
class LoadProgress:
    """A snapshot handed to ``on_progress`` about once a second and once at the end."""

    elapsed_s: float
    planned: int
    sent: int
    completed: int
    failed: int


@dataclass(frozen=True)
class LoadReport:
    """What one run did. Latencies are of successful (2xx) requests only, in milliseconds.

    Failures are left out of the latency figures because a timeout's "latency" is the timeout
    itself; they are counted in ``failures_by_reason`` (``http_<status>``, ``timeout``,
    ``connection_error``, ``client_error``, ``deadline``). The latency fields are None when no
    request succeeded.
    """

    count: int
    failed: int
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    duration_s: float = 0.0

    @property
    def succeeded(self) -> int:
        return self.count - self.failed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict, for benchmark output."""
        return {
            "count": self.count,
            "failed": self.failed,
            "failures_by_reason": dict(sorted(self.failures_by_reason.items())),
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "mean_ms": self.mean_ms,
            "duration_s": self.duration_s,
        }


def check_loopback_url(url: str) -> str:
    """``url`` if it is http(s) to localhost, 127.0.0.0/8 or ::1; else a ValueError naming it."""
    if not isinstance(url, str):
        raise ValueError(f"url must be a string, got {url!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        raise ValueError(f"url is malformed ({exc}): {url!r}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"url must be http or https, got {url!r}")
    if host is None:
        raise ValueError(f"url has no host: {url!r}")
    if host == "localhost":
        return url
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"url must point at a loopback address, got host {host!r}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if not addr.is_loopback:
        raise ValueError(f"url must point at a loopback address, got host {host!r}")
    return url


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty sorted list (an observed value, never a blend)."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


class _Tally:
    """Outcome counters shared by the request coroutines (one event loop, so no locks)."""

    def __init__(self) -> None:
        self.sent = 0
        self.completed = 0
        self.latencies_ms: list[float] = []
        self.failures: Counter[str] = Counter()

    def fail(self, reason: str) -> None:
        self.completed += 1
        self.failures[reason] += 1


async def _one_request(
    session: aiohttp.ClientSession,
    url: str,
    json_body: Any,
    scheduled: float,
    tally: _Tally,
) -> None:
    loop = asyncio.get_running_loop()
    tally.sent += 1
    try:
        kwargs: dict[str, Any] = {"allow_redirects": False}
        if json_body is not None:
            kwargs["json"] = json_body
        async with session.post(url, **kwargs) as resp:
            await resp.read()
            status = resp.status
    except TimeoutError:  # before ClientConnectionError: ServerTimeoutError is both
        tally.fail("timeout")
        return
    except aiohttp.ClientConnectionError:
        tally.fail("connection_error")
        return
    except aiohttp.ClientError:
        tally.fail("client_error")
        return
    if 200 <= status < 300:
        tally.completed += 1
        tally.latencies_ms.append((loop.time() - scheduled) * 1000.0)
    else:
        tally.fail(f"http_{status}")


async def run_load_async(
    url: str,
    pattern: LoadPattern,
    *,
    seed: int = 0,
    timeout_s: float = 30.0,
    json_body: Any = None,
    on_progress: Callable[[LoadProgress], None] | None = None,
) -> LoadReport:
    """Like :func:`run_load`, for callers that already run an event loop."""
    check_loopback_url(url)
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not 0 < timeout_s <= _MAX_TIMEOUT_S
    ):
        raise ValueError(f"timeout_s must be in (0, {_MAX_TIMEOUT_S:g}], got {timeout_s!r}")
    arrivals = pattern.arrival_times(seed)
    loop = asyncio.get_running_loop()
    tally = _Tally()
    start = loop.time()
    deadline = start + float(pattern.duration_s) + float(timeout_s) + _GRACE_S
    next_progress = start + _PROGRESS_EVERY_S

    def progress(now: float) -> None:
        if on_progress is not None:
            on_progress(
                LoadProgress(
                    elapsed_s=now - start,
                    planned=len(arrivals),
                    sent=tally.sent,
                    completed=tally.completed,
                    failed=sum(tally.failures.values()),
                )
            )

    logger.info("load: %d requests to %s over %.1f s", len(arrivals), url, pattern.duration_s)
    connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=float(timeout_s))
    pending: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False
    ) as session:
        try:
            for i, at in enumerate(arrivals):
                scheduled = start + at
                delay = scheduled - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = loop.time()
                if now >= deadline:  # the loop fell so far behind that the run is over
                    for _ in arrivals[i:]:
                        tally.fail("deadline")
                    break
                task = asyncio.create_task(_one_request(session, url, json_body, scheduled, tally))
                pending.add(task)
                task.add_done_callback(pending.discard)
                if now >= next_progress:
                    progress(now)
                    next_progress = now + _PROGRESS_EVERY_S
            while pending and (now := loop.time()) < deadline:
                await asyncio.wait(set(pending), timeout=min(_PROGRESS_EVERY_S, deadline - now))
                if pending:
                    progress(loop.time())
        finally:
            abandoned = [task for task in pending if not task.done()]
            for task in abandoned:
                task.cancel()
            if abandoned:
                await asyncio.gather(*abandoned, return_exceptions=True)
                for task in abandoned:
                    if task.cancelled():  # one that finished meanwhile has counted itself
                        tally.fail("deadline")
    end = loop.time()
    progress(end)

    lat = sorted(tally.latencies_ms)
    report = LoadReport(
        count=len(arrivals),
        failed=sum(tally.failures.values()),
        failures_by_reason=dict(tally.failures),
        p50_ms=_percentile(lat, 50) if lat else None,
        p99_ms=_percentile(lat, 99) if lat else None,
        mean_ms=sum(lat) / len(lat) if lat else None,
        duration_s=end - start,
    )
    logger.info("load done: %s", report.to_dict())
    return report


def run_load(
    url: str,
    pattern: LoadPattern,
    *,
    seed: int = 0,
    timeout_s: float = 30.0,
    json_body: Any = None,
    on_progress: Callable[[LoadProgress], None] | None = None,
) -> LoadReport:
    """Send ``pattern``'s arrivals (for ``seed``) as HTTP POSTs to ``url`` and report.

    ``url`` must be loopback (ValueError naming ``url`` otherwise). ``json_body``, when given,
    is sent as the JSON body of every request. Returns by itself within about
    ``duration_s + timeout_s``. Runs its own event loop; from inside one, use
    :func:`run_load_async`.
    """
    return asyncio.run(
        run_load_async(
            url,
            pattern,
            seed=seed,
            timeout_s=timeout_s,
            json_body=json_body,
            on_progress=on_progress,
        )
    )
