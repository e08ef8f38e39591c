"""Serve's HTTP proxy, as the serving pool reaches it.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`. Its own state because the
address is not ours to choose once Serve runs: a restarted scheduler, or a user who
started Serve first, finds the proxy already up on some host and port, and the URLs
lyra hands out (and its ingress replicas' upstream) must be that proxy's.
"""

from __future__ import annotations

import json
import logging
import urllib.request

from ray import serve

log = logging.getLogger(__name__)

PROXY_LOCATION = "HeadOnly"
"""Where Serve runs its HTTP proxies: the head only. WHY: every request lyra routes enters
at the head's proxy (the URLs it hands out), goes to the service's ingress (on the head)
and from there by handle to the copies on the servers; with Serve's default (a proxy on
every node with a replica) each serving server would also run a proxy no client is told
of, started again at every reclaim beside the app's replicas and stopped at every lend."""


def start_serve(host: str, port: int) -> tuple[str, int]:
    """Start Serve with its proxy at ``host:port`` on the head, or adopt the Serve already
    running (a restarted scheduler's, or one a user started): where its proxy listens."""
    serve.start(proxy_location=PROXY_LOCATION, http_options={"host": host, "port": port})
    try:
        from ray.serve.context import _get_global_client

        client = _get_global_client()
        if client is not None:
            http = client.http_config
            return str(http.host), int(http.port)
    except Exception:  # private API gone: keep the configured address
        log.warning("cannot read Serve's HTTP address; assuming %s:%d", host, port)
    return host, port


class ServeProxy:
    def __init__(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        self.host, self.port = host, port
        self.started = False

    def start(self) -> None:
        """Start Serve's HTTP proxy, or adopt the one already running: its host and port
        are the truth."""
        if self.started:
            return
        self.host, self.port = start_serve(self.host, self.port)
        self.started = True

    def upstream(self) -> str:
        """The proxy as an ingress replica on the head reaches it."""
        host = self.host if self.host not in ("0.0.0.0", "", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"

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
