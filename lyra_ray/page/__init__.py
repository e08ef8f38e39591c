"""The operator's page: the cluster at a glance in a browser, served on the cluster.

A small Ray Serve application at :data:`ROUTE` on the cluster's Serve proxy (the same
proxy and port as the inference services, so ``lyra up`` has one HTTP address to print
and nothing else listens). It reads the scheduler through the SDK's client with the
caller's own lyra token, so a user sees what ``lyra status`` shows them and an admin
everything. Its modules: :mod:`.sessions` (login link -> cookie), :mod:`.assemble`
(the page's data, pure), :mod:`.rates` (req/s and latency from the ingress counters),
:mod:`.app` (the Serve deployment), :mod:`.deploy` (start it, build login links), and
``static/`` (plain HTML, CSS, JS and SVG: nothing is loaded from outside the cluster).

Its app name and route live in :mod:`lyra_ray.contract.page`, which the serving pool
reads to keep the page out of the services it counts.
"""

from __future__ import annotations

from lyra_ray.contract.page import APP_NAME, ROUTE, claims_page_route

__all__ = ["APP_NAME", "ROUTE", "claims_page_route"]
