"""Start the operator's page on the cluster's Serve proxy, and make its login links.

``lyra up``, ``lyra page``, the demo and the tests all start it here, with the proxy's
host and port from the scheduler's configuration (``serve_host`` / ``serve_port``, where
the inference services are too). Serve keeps one proxy per cluster: where it already
runs (the scheduler started it for a service) its address is the truth and is used.
Deploying again replaces the app in place (sessions live in the replica, so they end).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from lyra_ray.page import APP_NAME, ROUTE


def proxy_address(host: str, port: int) -> tuple[str, int]:
    """Start Serve's proxy at ``host:port`` unless one runs; return where it listens."""
    from lyra_ray.runtime.serve_proxy import start_serve

    return start_serve(host, port)


def page_url(host: str, port: int) -> str:
    from lyra_ray.runtime.serve_proxy import reachable_host  # Serve loads only when used

    shown = reachable_host(host)
    return f"http://{shown}:{port}{ROUTE}/"


def deploy_page(
    host: str = "127.0.0.1",
    port: int = 8000,
    dashboard: str | None = None,
    **options: Any,
) -> str:
    """Deploy the page (blocking until it answers) and return its address.

    ``dashboard``: the Ray dashboard's URL, for the page's links to Ray jobs, Train runs
    and logs. ``options``: the app's own (``idle_s``, ``max_s`` session lifetimes)."""
    from ray import serve

    from lyra_ray.page.app import OperatorPage

    host, port = proxy_address(host, port)
    app = OperatorPage.bind(dashboard, **options)  # type: ignore[attr-defined]
    serve.run(app, name=APP_NAME, route_prefix=ROUTE)
    return page_url(host, port)


def running_page() -> str | None:
    """The page's address where it is deployed on the connected cluster, else None."""
    from ray import serve

    try:
        if APP_NAME not in serve.status().applications:
            return None
        from ray.serve.context import _get_global_client

        client = _get_global_client()
        if client is None:
            return None
        return page_url(str(client.http_config.host), int(client.http_config.port))
    except Exception:
        return None


def login_link(url: str, token: str | None) -> str:
    """The link ``lyra page`` prints: the page with the caller's token, which the first
    load trades for a session cookie (and removes from the address bar)."""
    return f"{url}?token={quote(token, safe='')}" if token else url
