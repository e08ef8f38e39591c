"""When lyra's ingress may send a request again: only when it is safe.

The rule (docs/loaning.md, "Retries"): a request is resent, to another serving server
where there is one, only if

1. it never reached the application (the server's copy refused it before any replica
   saw it: no route there, its deployment unavailable, Serve's queue full, or no
   connection at all), or
2. its method is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, as RFC 9110 defines them)
   and no byte of the response has been sent to the client.

So a POST that reached the application is never sent twice: the application may have
acted on it, and only the application knows. A response already streaming (server-sent
events, a chunked body) that is cut because a replica died ends with an error the
client sees (the connection closes before the body's end), never with a silent replay
glued onto what was sent.

Pure: the ingress (:mod:`lyra_ray.serving.proxy_http`) classifies what happened and asks.
"""

from __future__ import annotations

from enum import Enum

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_ATTEMPTS = 3
"""Attempts per request at most (each to another server while others serve)."""


class Reach(Enum):
    """How far a failed attempt got."""

    NEVER = "never"
    """Refused before any replica of the application saw it."""
    MAYBE = "maybe"
    """Sent, then the copy or its replica went away before a response: it may have run."""


def may_resend(method: str, reach: Reach, bytes_sent: int, attempt: int) -> bool:
    """Whether attempt number ``attempt`` (1 = the first) may be followed by another."""
    if attempt >= MAX_ATTEMPTS or bytes_sent > 0:
        return False
    return reach is Reach.NEVER or method.upper() in IDEMPOTENT


SERVE_NOT_FOUND = b"Path '"
"""Serve's proxy answers a path no application holds with a 404 whose body starts so
(``Path '/x' not found. Ping http://.../-/routes ...``)."""
SERVE_REFUSALS = (b"Request dropped due to backpressure", b"is unavailable because it failed")
"""Serve's 503 bodies for a request its router dropped before any replica took it."""
REPLICA_GONE = b"Internal Server Error"
"""The 500 body of a request whose replica died before it answered (uvicorn's own when
the replica ended without a response; also an app's unhandled exception: either way the
request may have run)."""


def classify(status: int, body: bytes, route: str) -> Reach | None:
    """How far a request got, from Serve's answer at the copy's ``route``; None when
    the answer is the application's own (forwarded to the client as it is)."""
    if status == 404 and body.startswith(SERVE_NOT_FOUND + route.encode()):
        return Reach.NEVER
    if status == 503 and any(body.startswith(b) or b in body[:300] for b in SERVE_REFUSALS):
        return Reach.NEVER
    if status == 500 and body.strip() == REPLICA_GONE:
        return Reach.MAYBE
    return None
