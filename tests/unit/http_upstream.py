"""A real HTTP server standing for Serve's proxy and two servers' copies, and a driver
that sends one request through lyra's ASGI forwarder as Serve's replica would: the
harness of ``test_proxy_http.py`` (its tests of forwarding, retries and lost servers).

The upstream answers under each copy's route prefix as Serve's proxy does: an unknown
prefix gets Serve's 404 body, a copy whose replica "died" gets uvicorn's bare 500.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from lyra_ray.serving.proxy_http import HttpForwarder


class Router:
    def __init__(self, nodes: list[str]) -> None:
        self.routing = list(nodes)
        self.inflight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    async def pick(self, avoid: frozenset[str]) -> str | None:
        nodes = [n for n in self.routing if n not in avoid] or self.routing
        return min(nodes, key=lambda n: self.inflight[n]) if nodes else None

    def begin(self, node: str) -> None:
        self.inflight[node] += 1
        self.peak[node] = max(self.peak[node], self.inflight[node])

    def end(self, node: str) -> None:
        self.inflight[node] -= 1

    def route(self, node: str) -> str:
        return f"/_lyra/svc/{node}"


class Upstream:
    """Serve's proxy as the copies look through it: ``ok`` copies answer, ``dead`` ones
    500 as a dead replica does, any other prefix gets Serve's 404."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.seen: list[dict[str, Any]] = []
        self.dead: set[str] = set()
        self.done = asyncio.Event()
        """Set when the test ends: what still waits on it returns."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.split("/")  # '', '_lyra', 'svc', node, ...
        node, below = parts[3], "/" + "/".join(parts[4:])
        if node not in ("a", "b"):
            text = f"Path '{request.path}' not found. Ping http://.../-/routes for routes."
            return web.Response(status=404, text=text)
        self.calls[(node, below)] += 1
        if node in self.dead:
            return web.Response(status=500, text="Internal Server Error")
        if below.startswith("/stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(int(request.query.get("n", "5"))):
                await resp.write(f"data: {i}\n\n".encode())
                await asyncio.sleep(0.02)
                if below == "/stream-cut" and i == 1:
                    assert request.transport is not None
                    request.transport.close()  # the replica died mid-stream
                    return resp
            await resp.write_eof()
            return resp
        body = await request.read()
        self.seen.append(
            {
                "node": node,
                "method": request.method,
                "raw_path": request.raw_path,
                "headers": request.headers.copy(),
                "body": body,
            }
        )
        return web.Response(
            status=201,
            body=json.dumps({"node": node}).encode(),
            headers={"X-Reply": "yes", "Content-Type": "application/json"},
        )


def served(
    make: Callable[[], Upstream],
) -> Callable[[Callable[[Any, str], Awaitable[None]]], Callable[[], None]]:
    """A decorator: run ``test(upstream, base_url)`` in an event loop with a ``make()``
    upstream listening (no pytest-asyncio here: each test is one ``asyncio.run``)."""

    def wrap(test: Callable[[Any, str], Awaitable[None]]) -> Callable[[], None]:
        def run() -> None:
            async def main() -> None:
                up = make()
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", up.handle)
                runner = web.AppRunner(app)
                await runner.setup()
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
                try:
                    await test(up, f"http://127.0.0.1:{port}")
                finally:
                    up.done.set()
                    await runner.cleanup()

            asyncio.run(main())

        run.__name__ = test.__name__
        run.__doc__ = test.__doc__
        return run

    return wrap


with_upstream = served(Upstream)


def scope(method: str, raw_path: bytes, query: bytes = b"", headers: Any = ()) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "root_path": "/svc",
        "path": "/svc" + raw_path.decode(),
        "raw_path": b"/svc" + raw_path,
        "query_string": query,
        "headers": list(headers),
    }


async def call(
    fw: HttpForwarder, sc: dict[str, Any], body: bytes = b"", close: bool = True
) -> list[dict[str, Any]]:
    """One request through ``fw``; ``close``: then close its session (pass False while
    other calls share ``fw``: see :meth:`HttpForwarder.close`)."""
    chunks = [body[:3], body[3:]] if body else [b""]
    msgs = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        return msgs.pop(0) if msgs else {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(m: Any) -> None:
        sent.append(dict(m))

    await fw(sc, receive, send)
    if close:
        await fw.close()
    return sent


def status_of(sent: list[dict[str, Any]]) -> int:
    return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))


def body_of(sent: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
