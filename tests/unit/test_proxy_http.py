"""lyra's HTTP ingress for a user's app (``serving/proxy_http.py``), against a real HTTP
server standing for Serve's proxy and two servers' copies.

No Ray: the forwarder is a plain ASGI app, driven here as Serve's replica drives it; the
upstream and the driver are :mod:`tests.unit.http_upstream`.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from aiohttp import web

from lyra_ray.serving.proxy_http import CutMidway, HttpForwarder
from lyra_ray.serving.retry import Reach, classify, may_resend
from tests.unit.http_upstream import (
    Router,
    Upstream,
    body_of,
    call,
    scope,
    served,
    status_of,
    with_upstream,
)


@with_upstream
async def test_a_request_passes_unchanged_both_ways(up: Upstream, base: str) -> None:
    fw = HttpForwarder("svc", base, Router(["a"]))
    headers = [
        (b"x-token", b"t1"),
        (b"content-type", b"application/octet-stream"),
        (b"connection", b"keep-alive"),  # hop-by-hop: not forwarded
        (b"x-token", b"t2"),
    ]
    body = bytes(range(256)) * 10
    sent = await call(fw, scope("PUT", b"/x/y%2Fz", b"a=1&b=%20x", headers), body)
    assert status_of(sent) == 201
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert (b"X-Reply", b"yes") in start["headers"]
    assert not any(k.lower() in (b"date", b"server") for k, _ in start["headers"])
    assert json.loads(body_of(sent)) == {"node": "a"}
    (seen,) = up.seen
    assert seen["method"] == "PUT" and seen["body"] == body
    assert seen["raw_path"] == "/_lyra/svc/a/x/y%2Fz?a=1&b=%20x"
    assert seen["headers"].getall("X-Token") == ["t1", "t2"]  # both, in order
    assert seen["headers"]["Content-Type"] == "application/octet-stream"
    assert seen["headers"].get("Connection") != "keep-alive"
    assert "User-Agent" not in seen["headers"]  # nothing added that the client did not send


@with_upstream
async def test_a_stream_arrives_chunk_by_chunk_and_counts_until_its_end(
    _up: Upstream, base: str
) -> None:
    router = Router(["a"])
    fw = HttpForwarder("svc", base, router)
    sent: list[dict[str, Any]] = []
    during: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(m: Any) -> None:
        sent.append(dict(m))
        if m["type"] == "http.response.body" and m.get("body"):
            during.append(router.inflight["a"])

    await fw(scope("GET", b"/stream", b"n=6"), receive, send)
    await fw.close()
    events = [m["body"] for m in sent if m["type"] == "http.response.body" and m["body"]]
    assert b"".join(events) == b"".join(f"data: {i}\n\n".encode() for i in range(6))
    assert len(events) >= 3  # passed on as they came, not gathered
    assert during and set(during) == {1}  # in flight on its server until the last chunk
    assert router.inflight["a"] == 0 and sent[-1]["more_body"] is False


@with_upstream
async def test_a_post_that_reached_the_app_is_never_resent(up: Upstream, base: str) -> None:
    up.dead.add("a")
    fw = HttpForwarder("svc", base, Router(["a", "b"]))
    sent = await call(fw, scope("POST", b"/work"), b'{"x": 1}')
    assert status_of(sent) == 500  # the app's server's answer, as it was
    assert up.calls[("a", "/work")] == 1 and up.calls[("b", "/work")] == 0
    assert fw.resent == 0


@with_upstream
async def test_an_idempotent_request_is_resent_elsewhere(up: Upstream, base: str) -> None:
    up.dead.add("a")
    fw = HttpForwarder("svc", base, Router(["a", "b"]))
    sent = await call(fw, scope("GET", b"/work"))
    assert status_of(sent) == 201 and json.loads(body_of(sent)) == {"node": "b"}
    assert up.calls[("a", "/work")] == 1 and up.calls[("b", "/work")] == 1
    assert fw.resent == 1


@with_upstream
async def test_a_post_that_never_reached_the_app_is_resent(up: Upstream, base: str) -> None:
    """A copy gone (Serve answers its prefix with 404 'Path ... not found'): the POST
    never reached the application, so it goes to another server."""
    fw = HttpForwarder("svc", base, Router(["gone", "a"]))
    sent = await call(fw, scope("POST", b"/work"), b"{}")
    assert status_of(sent) == 201 and json.loads(body_of(sent)) == {"node": "a"}
    assert fw.resent == 1


@with_upstream
async def test_a_stream_cut_midway_raises_and_is_not_replayed(up: Upstream, base: str) -> None:
    fw = HttpForwarder("svc", base, Router(["a", "b"]))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(m: Any) -> None:
        sent.append(dict(m))

    with pytest.raises(CutMidway):
        await fw(scope("GET", b"/stream-cut", b"n=6"), receive, send)
    await fw.close()
    assert b"data: 0" in body_of(sent)
    assert not any(m.get("more_body") is False for m in sent if "more_body" in m)  # no clean end
    assert sum(up.calls.values()) == 1 and fw.resent == 0


@with_upstream
async def test_no_server_is_a_503(_up: Upstream, base: str) -> None:
    fw = HttpForwarder("svc", base, Router([]))
    sent = await call(fw, scope("GET", b"/"))
    assert status_of(sent) == 503 and b"no server" in body_of(sent)


@with_upstream
async def test_requests_go_to_the_server_with_fewest_in_flight(_up: Upstream, base: str) -> None:
    router = Router(["a", "b"])
    fw = HttpForwarder("svc", base, router)
    sends = [call(fw, scope("GET", b"/stream", b"n=5"), close=False) for _ in range(6)]
    await asyncio.gather(*sends)
    await fw.close()
    assert router.peak["a"] == router.peak["b"] == 3


def test_the_retry_rule() -> None:
    assert may_resend("POST", Reach.NEVER, 0, 1)
    assert not may_resend("POST", Reach.MAYBE, 0, 1)
    for m in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "get"):
        assert may_resend(m, Reach.MAYBE, 0, 1)
    assert not may_resend("GET", Reach.MAYBE, 1, 1)  # a byte of the response went out
    assert not may_resend("GET", Reach.NEVER, 0, 3)  # attempts are bounded
    assert not may_resend("PATCH", Reach.MAYBE, 0, 1)


def test_serves_own_refusals_are_told_from_the_apps_answers() -> None:
    route = "/_lyra/svc/a"
    assert classify(404, b"Path '/_lyra/svc/a/x' not found. Ping ...", route) is Reach.NEVER
    assert classify(404, b'{"detail": "Not Found"}', route) is None  # the app's own 404
    assert classify(404, b"Path '/_lyra/svc/b/x' not found.", route) is None
    assert classify(503, b"Request dropped due to backpressure (num_queued_requests=3", route) is (
        Reach.NEVER
    )
    assert classify(503, b'{"error": "overloaded"}', route) is None
    assert classify(500, b"Internal Server Error", route) is Reach.MAYBE
    assert classify(500, b'{"error": "bug"}', route) is None


@with_upstream
async def test_lyras_router_counts_per_gpu_replica_and_drains(up: Upstream, base: str) -> None:
    """The ingress's own accounting (``proxy._Accounting``): a server with two GPU
    replicas takes twice the streams of one with one; a server taken out of the routing
    set (a lend's drain) gets nothing new, and its count falls to zero only as its
    streams end."""
    from lyra_ray.serving.proxy import _Accounting

    acct = _Accounting("svc")
    acct.set_backends({"a": ["lyra-svc--a", 2], "b": ["lyra-svc--b", 1]})
    fw = HttpForwarder("svc", base, acct)
    peak: Counter[str] = Counter()

    async def one() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(m: Any) -> None:
            for n in ("a", "b"):
                peak[n] = max(peak[n], acct.inflight.get(n, 0))

        await fw(scope("GET", b"/stream", b"n=8"), receive, send)

    await asyncio.gather(*(one() for _ in range(6)))
    assert (peak["a"], peak["b"]) == (4, 2)
    assert up.calls[("a", "/stream")] == 4 and up.calls[("b", "/stream")] == 2
    first = [asyncio.create_task(one()) for _ in range(2)]
    await asyncio.sleep(0.05)  # both under way
    on_b = acct.inflight["b"]
    acct.set_backends({"a": ["lyra-svc--a", 2]})  # b drains
    await asyncio.gather(*(one() for _ in range(4)))
    assert up.calls[("b", "/stream")] == 2 + on_b  # nothing new went to b
    await asyncio.gather(*first)
    assert acct.inflight["a"] == acct.inflight["b"] == 0
    await fw.close()


class Hanging(Upstream):
    """Serve's proxy holding requests for a copy whose only replica died with its server:
    it never answers them (``/hang``), or begins a stream and goes silent (``/half``),
    until the test ends (``done``)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.split("/")
        node, below = parts[3], "/" + "/".join(parts[4:])
        if node == "a" and below in ("/hang", "/half"):
            self.calls[(node, below)] += 1
            if below == "/half":
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                await resp.write(b"data: 0\n\n")
            await self.done.wait()
        return await super().handle(request)


with_hanging = served(Hanging)


async def _lost_after(fw: HttpForwarder, node: str, calls: Any, want: int) -> None:
    """Once ``want`` requests hang on ``node``, report it lost (the pool's NodeDown)."""
    while sum(n for (at, _), n in calls.items() if at == node) < want:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert fw.attempts.on(node) == want
    assert fw.attempts.lost(node) == want


@with_hanging
async def test_a_lost_servers_requests_end_at_once_by_the_retry_rule(
    up: Hanging, base: str
) -> None:
    """Requests held on a server that is then lost: a GET is sent again to the other
    server and answered; a POST, which may have run there, gets a 502 at once (not the
    client's own timeout); a stream already under way is cut, not replayed."""
    from lyra_ray.serving.proxy import _Accounting

    acct = _Accounting("svc")
    acct.set_backends({"a": ["lyra-svc--a", 1], "b": ["lyra-svc--b", 1]})
    fw = HttpForwarder("svc", base, acct)
    acct.inflight["b"] = 5  # every new request goes to a first

    async def one(method: str, path: bytes) -> list[dict[str, Any]] | CutMidway:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(m: Any) -> None:
            sent.append(dict(m))

        try:
            await fw(scope(method, path), receive, send)
        except CutMidway as e:
            return e
        return sent

    got = await asyncio.wait_for(  # the bound only ends a hang: each ends at the loss
        asyncio.gather(
            one("GET", b"/hang"),
            one("POST", b"/hang"),
            one("GET", b"/half"),
            _lost_after(fw, "a", up.calls, 3),
        ),
        timeout=30,
    )
    await fw.close()
    get, post, half = got[0], got[1], got[2]
    assert isinstance(get, list) and status_of(get) == 201
    assert json.loads(body_of(get)) == {"node": "b"} and fw.resent == 1
    assert isinstance(post, list) and status_of(post) == 502 and b"may have run" in body_of(post)
    assert up.calls[("b", "/hang")] == 1  # the GET, once; the POST never sent again
    assert isinstance(half, CutMidway) and "lost" in str(half)
    assert fw.attempts.on("a") == 0 and acct.inflight["a"] == 0
