"""lyra's HTTP ingress for a user's service: an ASGI reverse proxy over the servers' copies.

WHY a reverse proxy, not a ``DeploymentHandle``: a handle carries Python arguments, and
Serve feeds an ingress replica the ASGI ``scope``/``receive``/``send`` of an HTTP request
only from its own proxy. To pass any method, path, query, header and body to the user's
application, and its status, headers and streaming body back, lyra's ingress forwards the
request as HTTP to one server's copy of the application, through Serve's proxy at that
copy's internal route prefix (:func:`lyra_ray.serving.apps.copy_route`).

- The request: method, the path below the service's public route, the query, every
  header except the hop-by-hop ones, and the body (any content type; read whole first,
  so that a request the retry rule allows can be sent again).
- The response: status, headers (hop-by-hop ones and the front server's own ``date``
  and ``server`` left out) and the body, chunk by chunk as the application sends it
  (server-sent events, chunked bodies), never decompressed or re-encoded.
- Where: the server with the fewest requests in flight per GPU replica, among those
  serving (the :class:`Router`'s choice). A request counts on its server from before it
  is sent until its last byte has been passed on, so a drain (which waits for that
  count to reach zero) never cuts a stream.
- Failures: :mod:`lyra_ray.serving.retry` decides whether a failed attempt is sent again.
  A body cut mid-way raises, so the client's connection ends before the body does. An
  attempt on a server the pool reports lost (:mod:`lyra_ray.serving.attempts`) fails at
  once as one that may have run there.

No Ray here: :mod:`lyra_ray.serving.proxy` puts it behind a Serve deployment, and the
unit tests run it against a plain HTTP server.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import aiohttp
from yarl import URL

from lyra_ray.serving.attempts import Attempts, ServerLost
from lyra_ray.serving.retry import Reach, classify, may_resend

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""RFC 9110 section 7.6.1: headers of one connection, never forwarded."""
NOT_SENT_UP = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
"""Also recomputed for the hop up: the host (Serve's proxy), the body's length, and
``Expect: 100-continue`` (the body is already here)."""
NOT_SENT_BACK = HOP_BY_HOP | {b"date", b"server"}
"""Also added again by the server in front of lyra's ingress (else sent twice)."""
PEEK_BYTES = 64 * 1024
"""An error answer (404, 500, 503) this small is read whole before anything is sent on,
to tell Serve's refusals from the application's own answers."""
CONNECT_TIMEOUT_S = 10.0


class Router(Protocol):
    """Where requests go: the serving servers and their counts (lyra's ingress)."""

    async def pick(self, avoid: frozenset[str]) -> str | None:
        """A serving server, not one of ``avoid`` while another serves; None if none
        serves (after a short wait)."""
        ...

    def begin(self, node: str) -> None: ...

    def end(self, node: str) -> None: ...

    def route(self, node: str) -> str:
        """The internal route prefix of ``node``'s copy of the application."""
        ...


class CutMidway(RuntimeError):
    """The application's response ended before its body did (a replica died)."""


def below_prefix(scope: Scope) -> str:
    """The request's path below the public route prefix, percent-encoding kept."""
    root = str(scope.get("root_path") or "")
    raw = scope.get("raw_path")
    if isinstance(raw, bytes | bytearray) and raw:
        text = bytes(raw).decode("latin-1")
    else:
        from urllib.parse import quote

        text = quote(str(scope.get("path") or "/"), safe="/:@!$&'()*+,;=-._~")
    if root and text.startswith(root):
        text = text[len(root) :]
    return text if text.startswith("/") else "/" + text


def upstream_headers(scope: Scope) -> list[tuple[str, str]]:
    return [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in scope.get("headers") or []
        if k.lower() not in NOT_SENT_UP
    ]


def downstream_headers(raw: Any) -> list[tuple[bytes, bytes]]:
    return [(bytes(k), bytes(v)) for k, v in raw if bytes(k).lower() not in NOT_SENT_BACK]


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body; None if the client left first."""
    parts: list[bytes] = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None
        parts.append(bytes(msg.get("body") or b""))
        if not msg.get("more_body"):
            return b"".join(parts)


async def _answer(send: Send, status: int, text: str) -> None:
    body = json.dumps({"error": text}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _resendable(method: str, attempt: int, reach: Reach) -> bool:
    return may_resend(method, reach, 0, attempt)


class HttpForwarder:
    """The ASGI app of lyra's ingress for one service (see the module docstring)."""

    def __init__(
        self, service: str, base_url: str, router: Router, attempts: Attempts | None = None
    ) -> None:
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.router = router
        self.attempts = attempts or Attempts()
        """Attempts in flight by server: :meth:`Attempts.lost` ends a lost server's."""
        self._session: aiohttp.ClientSession | None = None
        self.resent = 0
        """Attempts sent again under the retry rule (for the ingress's stats)."""

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                connector=aiohttp.TCPConnector(limit=0),
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    async def close(self) -> None:
        """Close the upstream session once no request is in flight: aiohttp leaves a
        response still being read from a closed session waiting for ever (a unit test
        whose first finished call closed the forwarder under five other streams hung
        until its 900-s timeout in a loaded suite run)."""
        if self._session is not None:
            await self._session.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets are not proxied (docs/loaning.md)
            await send({"type": "websocket.close", "code": 1003})
            return
        body = await _read_body(receive)
        if body is None:
            return
        await self.forward(scope, body, send)

    async def forward(self, scope: Scope, body: bytes, send: Send) -> bool:
        """Send the request to a serving copy (again, where the retry rule allows);
        True if a response was passed on whole."""
        method = str(scope.get("method", "GET")).upper()
        path, query = below_prefix(scope), bytes(scope.get("query_string") or b"")
        headers = upstream_headers(scope)
        tried: set[str] = set()
        attempt = 0
        while True:
            attempt += 1
            node = await self.router.pick(frozenset(tried))
            if node is None:
                await _answer(send, 503, f"service {self.service}: no server takes requests")
                return False
            tried.add(node)
            route = self.router.route(node)
            target = f"{self.base_url}{route}{path}" + (
                f"?{query.decode('latin-1')}" if query else ""
            )
            started = False

            async def passed_on(msg: Message) -> None:
                nonlocal started
                started = True
                await send(msg)

            self.router.begin(node)
            try:
                reach, sent = await self.attempts.run(
                    node,
                    self._attempt(
                        method,
                        URL(target, encoded=True),
                        headers,
                        body,
                        route,
                        passed_on,
                        functools.partial(_resendable, method, attempt),
                    ),
                )
            except ServerLost as e:
                if started:  # the client has part of a response: end its connection
                    raise CutMidway(f"service {self.service}: {e}") from None
                reach, sent = Reach.MAYBE, 0  # sent up; it may have run there
            finally:
                self.router.end(node)
            if reach is None:
                return True
            if may_resend(method, reach, sent, attempt):
                self.resent += 1
                log.info(
                    "%s: %s %s on %s: %s, sent again",
                    self.service,
                    method,
                    path,
                    node[:12],
                    reach.value,
                )
                continue
            if sent == 0:
                await _answer(
                    send,
                    502 if reach is Reach.MAYBE else 503,
                    f"service {self.service}: the server's copy went away "
                    + (
                        "before the request reached it"
                        if reach is Reach.NEVER
                        else f"while handling it; a {method} that may have run is not sent again"
                    ),
                )
            return False

    async def _attempt(
        self,
        method: str,
        url: URL,
        headers: list[tuple[str, str]],
        body: bytes,
        route: str,
        send: Send,
        resendable: Callable[[Reach], bool],
    ) -> tuple[Reach | None, int]:
        """One attempt: (None, bytes sent) when a response was passed on; (how far it
        got, bytes sent) when it failed. A refusal by Serve that may not be sent again
        is passed on as Serve gave it. Raises :class:`CutMidway` when the body broke
        off after its first bytes were sent on."""
        try:
            resp = await self.session().request(
                method,
                url,
                headers=headers,
                data=body if body else None,
                allow_redirects=False,
                compress=None,
            )
        except aiohttp.ClientConnectorError:
            return Reach.NEVER, 0  # no connection: nothing was sent
        except (TimeoutError, aiohttp.ClientError):
            return Reach.MAYBE, 0  # sent, then the connection ended before any answer
        sent, whole = 0, False
        try:
            peeked: bytes | None = None
            if resp.status in (404, 500, 503) and (resp.content_length or 0) <= PEEK_BYTES:
                try:
                    peeked = await resp.content.read(PEEK_BYTES + 1)
                except (TimeoutError, aiohttp.ClientError):
                    return Reach.MAYBE, 0
                reach = classify(resp.status, peeked, route) if len(peeked) <= PEEK_BYTES else None
                if reach is not None and resendable(reach):
                    return reach, 0
            await send(
                {
                    "type": "http.response.start",
                    "status": resp.status,
                    "headers": downstream_headers(resp.raw_headers),
                }
            )
            if peeked:
                sent += len(peeked)
                await send({"type": "http.response.body", "body": peeked, "more_body": True})
            try:
                async for chunk in resp.content.iter_any():
                    sent += len(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (TimeoutError, aiohttp.ClientError) as e:
                raise CutMidway(
                    f"service {self.service}: the response broke off after {sent} bytes ({e})"
                ) from None
            whole = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return None, sent
        finally:
            if whole:
                resp.release()  # the connection goes back to the pool
            else:
                resp.close()  # cut or abandoned: the upstream request ends with it
