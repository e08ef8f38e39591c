"""lyra's ingress for a user's application: the service's public route on Serve's proxy.

One replica per service holds the route. It knows which servers serve (the serving pool
tells it, :meth:`AppIngress.set_backends`), counts requests in flight per server (what a
drain waits for) and in all (what lyra's demand estimate reads, :meth:`stats`), and
sends each request to the serving server with the fewest in flight per GPU replica:

- HTTP callers reach the application through :class:`~lyra_ray.serving.proxy_http.HttpForwarder`,
  which forwards to the chosen server's copy through Serve's proxy;
- Python callers (``Client().service_handle(name)``, :mod:`lyra_ray.client.service_handle`)
  call :meth:`call`, which forwards ``.remote(...)`` to the chosen copy's ingress
  deployment by its ``DeploymentHandle``.

Both follow the same drain: a server stops getting new requests the moment the pool
says so, and its copy is deleted only once its count is zero. A handle call is sent
again only if it never reached a copy (the copy was gone): lyra cannot know whether a
Python method may run twice. A server that is lost rather than drained
(:meth:`AppIngress.lost`) ends what is still on it at once: an HTTP request as the retry
rule says, a handle call with :class:`~lyra_ray.serving.attempts.ServerLost`.

The replica runs in the service's runtime env, so handle calls' arguments and results,
which may be the user's own types, unpickle here as they do in the application.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ray import serve

from lyra_ray.serving.attempts import Attempts
from lyra_ray.serving.meter import RequestMeter
from lyra_ray.serving.names import copy_route
from lyra_ray.serving.proxy_http import CutMidway, HttpForwarder, Scope, Send

log = logging.getLogger(__name__)

WAIT_FOR_SERVER_S = 10.0
"""How long a request waits for a serving server (only while none serves) before a 503."""


class NoServer(RuntimeError):
    """No server of the service takes requests."""


class _Accounting:
    """Where requests go and how many are in flight where (one ingress replica's view)."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.apps: dict[str, str] = {}
        """node id -> the copy's Serve application."""
        self.replicas: dict[str, int] = {}
        """node id -> the copy's GPU replicas."""
        self.routing: set[str] = set()
        self.inflight: dict[str, int] = {}

    def set_backends(self, backends: dict[str, list[Any]]) -> list[str]:
        for node, (app, replicas) in backends.items():
            self.apps[node] = str(app)
            self.replicas[node] = max(1, int(replicas))
            self.inflight.setdefault(node, 0)
        self.routing = set(backends)
        return sorted(self.routing)

    def choose(self, avoid: frozenset[str]) -> str | None:
        nodes = sorted(self.routing - avoid) or sorted(self.routing)
        if not nodes:
            return None
        return min(nodes, key=lambda n: self.inflight.get(n, 0) / self.replicas[n])

    async def pick(self, avoid: frozenset[str]) -> str | None:
        node = self.choose(avoid)
        deadline = time.monotonic() + WAIT_FOR_SERVER_S
        while node is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            node = self.choose(avoid)
        return node

    def begin(self, node: str) -> None:
        self.inflight[node] = self.inflight.get(node, 0) + 1

    def end(self, node: str) -> None:
        self.inflight[node] = self.inflight.get(node, 1) - 1

    def route(self, node: str) -> str:
        return copy_route(self.service, node)


class _Metered:
    """The ASGI app: every HTTP request counted by the ingress's meter. A class with an
    async ``__call__``: uvicorn (which Serve runs the app's lifespan with) takes a bound
    method for an ASGI 2 app."""

    def __init__(self, forwarder: HttpForwarder, meter: RequestMeter) -> None:
        self.forwarder, self.meter = forwarder, meter

    async def __call__(self, scope: Scope, receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            await self.forwarder(scope, receive, send)
            return
        self.meter.begin()
        ok = False
        try:
            await self.forwarder(scope, receive, send)
            ok = True
        except CutMidway as e:
            log.warning("%s", e)
            raise
        finally:
            self.meter.end(ok)


async def _result(handle: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return await handle.remote(*args, **kwargs)


@serve.deployment(max_ongoing_requests=100_000, ray_actor_options={"num_cpus": 0})
@serve.ingress()
class AppIngress:
    """The public route of one user service (see the module docstring)."""

    def __init__(self, service: str, upstream: str) -> None:
        self.service = service
        self.acct = _Accounting(service)
        self.meter = RequestMeter()
        self.attempts = Attempts()
        self.forwarder = HttpForwarder(service, upstream, self.acct, self.attempts)
        self._handles: dict[str, Any] = {}

    def __serve_build_asgi_app__(self) -> Any:
        return _Metered(self.forwarder, self.meter)

    # ---------------------------------------------------------------- what the pool calls

    def set_backends(self, backends: dict[str, list[Any]]) -> list[str]:
        """``{node id: [copy app, GPU replicas]}`` take new requests from now on; every
        other server stops taking them at once (its requests in flight finish)."""
        return self.acct.set_backends(backends)

    def inflight_on(self, node: str) -> int:
        """Requests (streams until their last byte, handle calls) still on ``node``."""
        return self.acct.inflight.get(node, 0)

    def lost(self, node: str) -> int:
        """``node`` is gone (not drained): it takes nothing new, and every request still
        on it ends now, sent again elsewhere where the retry rule allows, else failed;
        returns how many were on it. WHY: see :mod:`lyra_ray.serving.attempts`."""
        self.acct.routing.discard(node)
        ended = self.attempts.lost(node)
        if ended:
            log.warning(
                "%s: server %s lost with %d request(s) on it", self.service, node[:12], ended
            )
        return ended

    def forget(self, node: str) -> None:
        """A drained server's copy is being deleted: forget it."""
        if node not in self.acct.routing and not self.acct.inflight.get(node):
            self.acct.apps.pop(node, None)
            self.acct.inflight.pop(node, None)
            self._handles.pop(node, None)

    def stats(self) -> dict[str, Any]:
        return {
            **self.meter.stats(),
            "routing": sorted(self.acct.routing),
            "inflight": dict(self.acct.inflight),
            "resent": self.forwarder.resent,
        }

    # ---------------------------------------------------------------- handle callers

    def _handle(self, node: str) -> Any:
        if node not in self._handles:
            self._handles[node] = serve.get_app_handle(self.acct.apps[node])
        return self._handles[node]

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``method`` of a serving copy's ingress deployment with ``args``/``kwargs``:
        sent again, to another server, only if it never reached a copy."""
        from ray.serve.exceptions import DeploymentUnavailableError, RayServeException

        tried: set[str] = set()
        self.meter.begin()
        ok = False
        try:
            while True:
                node = await self.acct.pick(frozenset(tried))
                if node is None:
                    raise NoServer(f"service {self.service}: no server takes requests")
                tried.add(node)
                self.acct.begin(node)
                try:
                    try:
                        handle = self._handle(node).options(method_name=method)
                    except RayServeException:  # the copy's app is gone: never reached
                        self._handles.pop(node, None)
                        if len(tried) < 3:
                            continue
                        raise
                    try:
                        out = await self.attempts.run(node, _result(handle, args, kwargs))
                    except DeploymentUnavailableError:
                        if len(tried) < 3:
                            continue
                        raise
                finally:
                    self.acct.end(node)
                ok = True
                return out
        finally:
            self.meter.end(ok)
