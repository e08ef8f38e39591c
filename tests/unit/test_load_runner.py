"""The load driver against a real aiohttp server on 127.0.0.1 (no Ray, no other hosts)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from lyra_ray.serving.load import LoadProgress, check_loopback_url, run_load
from lyra_ray.serving.load_pattern import LoadPattern
from tests.threaded_http import served

FAIL_EVERY = 4  # the /flaky handler answers 503 to every 4th request


@dataclass
class _Server:
    port: int
    hits: dict[str, int] = field(default_factory=dict)
    bodies: list[bytes] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    """An aiohttp app on its own event loop in a thread, so the sync run_load can drive it."""
    srv = _Server(port=0)

    async def ok(request: web.Request) -> web.Response:
        srv.hits["ok"] = srv.hits.get("ok", 0) + 1
        srv.bodies.append(await request.read())
        return web.Response(text="ok")

    async def flaky(request: web.Request) -> web.Response:
        n = srv.hits.get("flaky", 0) + 1
        srv.hits["flaky"] = n
        return web.Response(status=503 if n % FAIL_EVERY == 0 else 200)

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.5)
        return web.Response(text="late")

    with served([("/ok", ok), ("/flaky", flaky), ("/slow", slow)]) as srv.port:
        yield srv


def test_counts_failures_and_latencies(server: _Server) -> None:
    pattern = LoadPattern(kind="constant", peak_rps=20.0, duration_s=2.0)
    planned = len(pattern.arrival_times(seed=5))
    seen: list[LoadProgress] = []
    report = run_load(
        f"http://127.0.0.1:{server.port}/flaky",
        pattern,
        seed=5,
        timeout_s=5.0,
        on_progress=seen.append,
    )
    assert 20 <= planned <= 60
    assert report.count == planned == server.hits["flaky"]
    assert report.failed == planned // FAIL_EVERY
    assert report.failures_by_reason == {"http_503": planned // FAIL_EVERY}
    assert report.p50_ms is not None and report.p99_ms is not None and report.mean_ms is not None
    assert 0 < report.p50_ms <= report.p99_ms < 5000
    assert 1.5 < report.duration_s < 5.0
    assert seen and seen[-1].completed == planned and seen[-1].sent == planned
    d = report.to_dict()
    assert d["count"] == planned and d["failures_by_reason"] == report.failures_by_reason


def test_json_body_sent(server: _Server) -> None:
    pattern = LoadPattern(kind="constant", peak_rps=20.0, duration_s=0.3)
    before = len(server.bodies)
    report = run_load(
        f"http://localhost:{server.port}/ok", pattern, seed=1, json_body={"prompt": "hi"}
    )
    assert report.failed == 0
    assert server.bodies[before:] == [b'{"prompt": "hi"}'] * report.count


def test_timeouts_counted_and_run_bounded(server: _Server) -> None:
    pattern = LoadPattern(kind="constant", peak_rps=20.0, duration_s=0.4)
    report = run_load(f"http://127.0.0.1:{server.port}/slow", pattern, seed=2, timeout_s=0.1)
    assert report.count > 0
    assert report.failures_by_reason == {"timeout": report.count}
    assert report.p50_ms is None
    assert report.duration_s < 0.4 + 0.1 + 1.0


def test_connection_errors_counted() -> None:
    port = _free_port()  # nothing listens there
    pattern = LoadPattern(kind="constant", peak_rps=20.0, duration_s=0.3)
    report = run_load(f"http://127.0.0.1:{port}/", pattern, seed=3, timeout_s=2.0)
    assert report.count > 0
    assert report.failures_by_reason == {"connection_error": report.count}


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1:8000/",
        "http://example.com/",
        "http://127.0.0.1@example.com/",
        "http://[2001:db8::1]:8000/",
        "ftp://127.0.0.1/",
        "http://localhost.example.com/",
        "http:///nohost",
    ],
)
def test_non_loopback_refused(url: str) -> None:
    pattern = LoadPattern(kind="constant", peak_rps=1.0, duration_s=1.0)
    with pytest.raises(ValueError, match="url"):
        run_load(url, pattern)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/x", "http://127.8.9.10/", "http://[::1]:80/", "https://localhost/"],
)
def test_loopback_accepted(url: str) -> None:
    assert check_loopback_url(url) == url


def test_bad_timeout_refused() -> None:
    pattern = LoadPattern(kind="constant", peak_rps=1.0, duration_s=1.0)
    with pytest.raises(ValueError, match="timeout_s"):
        run_load("http://127.0.0.1:1/", pattern, timeout_s=0.0)
