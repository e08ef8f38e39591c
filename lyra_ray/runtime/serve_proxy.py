"""Serve's HTTP proxy, as the serving pool reaches it.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`. Its own state because the
address is not ours to choose once Serve runs: a restarted scheduler, or a user who
started Serve first, finds the proxy already up on some host and port, and the URLs
lyra hands out (and its ingress replicas' upstream) must be that proxy's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from typing import Any

from ray import serve
from ray.exceptions import RayActorError

from lyra_ray.runtime.run_outcome import first_line

log = logging.getLogger(__name__)

PROXY_LOCATION = "HeadOnly"
"""Where Serve runs its HTTP proxies: the head only. WHY: every request lyra routes enters
at the head's proxy (the URLs it hands out), goes to the service's ingress (on the head)
and from there by handle to the copies on the servers; with Serve's default (a proxy on
every node with a replica) each serving server would also run a proxy no client is told
of, started again at every reclaim beside the app's replicas and stopped at every lend."""


def start_serve(host: str, port: int, ready_s: float = 120.0) -> tuple[str, int]:
    """Start Serve with its proxy at ``host:port`` on the head, or adopt the Serve already
    running (a restarted scheduler's, or one a user started): where its proxy listens.

    WHY a second try: ``serve.start`` waits on the first proxy actor the controller made,
    and the controller replaces a proxy not ready within three of Serve's ready checks
    (5 s each by default): on a loaded host the proxy's process had not even started, was
    killed, and ``serve.start`` raised ``ActorDiedError`` (found under a one-core CPU hog)
    while Serve itself was up. The second call adopts that Serve; this then waits, up to
    ``ready_s``, until the replacement proxy answers its health check. The clusters lyra
    starts give each check 30 s (``client/quiet.py: NODE_DEFAULTS``), so that a slow
    start is waited for rather than replaced again and again."""
    options: dict[str, Any] = {
        "proxy_location": PROXY_LOCATION,
        "http_options": {"host": host, "port": port},
    }
    replaced = False
    try:
        serve.start(**options)
    except RayActorError as e:
        log.warning("Serve's first HTTP proxy was replaced while starting: %s", first_line(e))
        serve.start(**options)
        replaced = True
    host, port = _address(host, port)
    if replaced:
        _wait_healthy(host, port, ready_s)
    return host, port


def _address(host: str, port: int) -> tuple[str, int]:
    """Where the running Serve's proxy listens (its own config is the truth)."""
    try:
        from ray.serve.context import _get_global_client

        client = _get_global_client()
        if client is not None:
            http = client.http_config
            return str(http.host), int(http.port)
    except Exception:  # private API gone: keep the configured address
        log.warning("cannot read Serve's HTTP address; assuming %s:%d", host, port)
    return host, port


def reachable_host(host: str) -> str:
    """The address a client on the head dials for a proxy bound to ``host`` (a wildcard
    bind is reached on loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _wait_healthy(host: str, port: int, ready_s: float) -> None:
    """Until the proxy at ``host:port`` answers ``/-/healthz`` with 200 (TimeoutError
    after ``ready_s``, naming the address)."""
    shown = reachable_host(host)
    url = f"http://{shown}:{port}/-/healthz"
    deadline = time.monotonic() + ready_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass  # not listening yet, or answering 503 while it starts
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Serve's HTTP proxy at {shown}:{port} not healthy after {ready_s:.0f} s"
            )
        time.sleep(0.5)


class ServeProxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        self.host, self.port = host, port
        self.started = False
        self._starting = threading.Lock()

    def start(self) -> None:
        """Start Serve's HTTP proxy, or adopt the one already running: its host and port
        are the truth.

        WHY a lock of its own: a deploy starts Serve outside the scheduler's lock
        (``serve.start`` took 68 s under two busy loops, 1.5 s quiet; a whole deploy under
        such load took 72-101 s, and every view waited behind it); two deploys at once
        then start it once, and the second waits here, not the scheduler."""
        if self.started:
            return
        with self._starting:
            if self.started:
                return
            self.host, self.port = start_serve(self.host, self.port)
            self.started = True

    def upstream(self) -> str:
        """The proxy as an ingress replica on the head reaches it."""
        return f"http://{reachable_host(self.host)}:{self.port}"

    def url(self, route: str) -> str:
        """A route's URL as users are told it."""
        return f"http://{self.host}:{self.port}{route}"

    def foreign_routes(self) -> dict[str, str]:
        """Routes of Serve applications on the cluster that are not lyra's (the proxy
        lists them at ``/-/routes``); {} while Serve is not running."""
        if not self.started:
            return {}
        try:
            with urllib.request.urlopen(f"{self.upstream()}/-/routes", timeout=5) as r:
                routes = json.loads(r.read() or b"{}")
        except Exception:  # the proxy busy: the services' own routes are still checked
            log.warning("cannot read Serve's routes", exc_info=True)
            return {}
        return {
            str(route): f"Serve application {app!r}"
            for route, app in routes.items()
            if not str(app).startswith("lyra-")
        }
