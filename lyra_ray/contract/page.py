"""The operator page's Serve app name and route, shared by the page and the serving pool.

The page (:mod:`lyra_ray.page`) is a Serve application on the same proxy as the
inference services, yet never one of them: the serving pool refuses a service whose
route would take the page's (:func:`claims_page_route`), and no service's apps
(``lyra-<service>...``, names that cannot start with '-') can take the page's name.
"""

from __future__ import annotations

APP_NAME = "lyra--page"
"""The page's Serve application."""
ROUTE = "/lyra"
"""The page's HTTP route on the Serve proxy; no inference service may claim it."""


def claims_page_route(route: str) -> bool:
    """Whether a service's HTTP route would take the page's (the route or one below it:
    Serve matches the longest prefix, so ``/lyra/x`` would take part of the page)."""
    r = route.rstrip("/") or "/"
    return r == ROUTE or r.startswith(ROUTE + "/")
