"""The page's Ray Serve deployment: login, logout, the page itself and its data.

Why a Serve app on the cluster's Serve proxy rather than a route of the scheduler's
node: the proxy already listens (the inference services use it, ``lyra up`` gives it a
port), Serve restarts a crashed replica, and the scheduler actor keeps no HTTP server
of its own to secure. The one replica sits on the head node (a zero-CPU share of its
``node:__internal_head__`` resource), never on an inference or training server, and the
serving pool does not know it (:func:`lyra_ray.page.claims_page_route`).

Routes below :data:`~lyra_ray.page.ROUTE`:

- ``GET /?token=T``: the login link. The token is checked by the scheduler (``whoami``)
  and exchanged for a session cookie; the answer redirects to the bare address, so the
  token leaves the address bar. A refused token gets the login form again.
- ``GET /``: the page with a live session, else the login form and nothing else.
- ``POST /login`` (a form with ``token``), ``POST /logout``.
- ``GET /api/state``: the page's data (:func:`lyra_ray.page.assemble.assemble`) read
  with the session's token; 401 without a session, and a token the scheduler refuses
  (its user removed) ends every session made from it.
- ``GET /static/<file>``: the page's own CSS and JS (package data, nothing external).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from ray import serve
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from lyra_ray.page import ROUTE
from lyra_ray.page.assemble import assemble
from lyra_ray.page.rates import ServiceRates
from lyra_ray.page.sessions import IDLE_S, MAX_S, SessionBook

log = logging.getLogger(__name__)

COOKIE = "lyra_page_session"
STATIC = {"page.js": "text/javascript", "page.css": "text/css"}
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def _static(name: str) -> str:
    return (resources.files("lyra_ray.page") / "static" / name).read_text(encoding="utf-8")


class Refused(Exception):
    """The scheduler refused the token (wrong, or its user removed)."""


@serve.deployment(
    num_replicas=1,
    max_ongoing_requests=64,
    ray_actor_options={"num_cpus": 0, "resources": {"node:__internal_head__": 0.001}},
)
class OperatorPage:
    def __init__(
        self, dashboard: str | None = None, idle_s: float = IDLE_S, max_s: float = MAX_S
    ) -> None:
        self.dashboard = dashboard
        self.sessions = SessionBook(idle_s, max_s)
        self.rates = ServiceRates(time.monotonic)
        self.max_s = max_s

    # ------------------------------------------------------------------ scheduler calls

    @staticmethod
    def _client(token: str) -> Any:
        from lyra_ray.sdk import Client

        return Client(token=token, retry_s=5.0)

    async def _whoami(self, token: str) -> dict[str, Any]:
        from lyra_ray.contract.errors import AuthError

        def call() -> dict[str, Any]:
            try:
                who: dict[str, Any] = self._client(token).whoami()
                return who
            except AuthError as e:
                raise Refused(str(e)) from None

        return await asyncio.to_thread(call)

    async def _state(self, token: str, who: dict[str, Any]) -> dict[str, Any]:
        from lyra_ray.contract.errors import AuthError

        def call() -> tuple[dict[str, Any], list[Any]]:
            try:
                c = self._client(token)
                return c.overview(), c.call("launches")
            except AuthError as e:
                raise Refused(str(e)) from None

        overview, launches = await asyncio.to_thread(call)
        rates = {
            s["name"]: self.rates.update(s["name"], s.get("counters"))
            for s in overview.get("serving", {}).get("services", [])
        }
        return assemble(overview, launches, who, time.time(), rates, self.dashboard)

    # ------------------------------------------------------------------ HTTP

    async def __call__(self, request: Request) -> Response:
        path = request.url.path
        if path.startswith(ROUTE):
            path = path[len(ROUTE) :]
        path = path or "/"
        try:
            return await self._route(request, path)
        except Exception:
            log.exception("operator page: %s failed", path)
            return JSONResponse({"error": "the page could not read the scheduler"}, 503)

    async def _route(self, request: Request, path: str) -> Response:
        method = request.method
        if path.startswith("/static/") and method == "GET":
            name = path[len("/static/") :]
            if name not in STATIC:
                return Response("not found", 404)
            return Response(_static(name), media_type=STATIC[name], headers=HEADERS)
        if path == "/login" and method == "POST":
            form = parse_qs((await request.body()).decode("utf-8", "replace"))
            return await self._login((form.get("token") or [""])[0].strip())
        if path == "/logout" and method == "POST":
            self.sessions.end(request.cookies.get(COOKIE))
            out = RedirectResponse(f"{ROUTE}/", 303, headers=HEADERS)
            out.delete_cookie(COOKIE, path=ROUTE)
            return out
        if path == "/api/state" and method == "GET":
            return await self._api_state(request)
        if path == "/" and method == "GET":
            token = request.query_params.get("token")
            if token is not None:
                return await self._login(token.strip())
            if self.sessions.get(request.cookies.get(COOKIE)) is None:
                return self._login_page()
            return HTMLResponse(_static("index.html"), headers=HEADERS)
        return Response("not found", 404)

    async def _login(self, token: str) -> Response:
        if not token:
            return self._login_page("give your lyra token")
        try:
            who = await self._whoami(token)
        except Refused:
            return self._login_page("that token was refused")
        s = self.sessions.open(token, str(who.get("name")), bool(who.get("admin")))
        out = RedirectResponse(f"{ROUTE}/", 303, headers=HEADERS)
        out.set_cookie(
            COOKIE, s.sid, max_age=int(self.max_s), path=ROUTE, httponly=True, samesite="strict"
        )
        return out

    def _login_page(self, error: str = "") -> Response:
        html = _static("login.html").replace("{{error}}", _escape(error))
        return HTMLResponse(html, 401 if error else 200, headers=HEADERS)

    async def _api_state(self, request: Request) -> Response:
        s = self.sessions.get(request.cookies.get(COOKIE))
        if s is None:
            return JSONResponse({"error": "not logged in"}, 401, headers=HEADERS)
        try:
            data = await self._state(s.token, {"name": s.name, "admin": s.admin})
        except Refused:
            self.sessions.end_token(s.token)
            return JSONResponse({"error": "your token was withdrawn"}, 401, headers=HEADERS)
        return Response(json.dumps(data), media_type="application/json", headers=HEADERS)


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


app = OperatorPage
