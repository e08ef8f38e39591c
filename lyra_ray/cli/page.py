"""``lyra page``: a login link to the operator's page for the calling user.

As Jupyter prints a link with a token: the link carries the caller's own lyra token,
which the page trades for a session cookie at first load and removes from the address
bar (:mod:`lyra_ray.page.sessions`). Where the page is not deployed yet (a cluster
started without ``lyra up``), this deploys it on the scheduler's Serve proxy first.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("page", help="print a login link to the operator's page (in a browser)")
    p.add_argument("--address", default=None)
    p.set_defaults(func=_page)


def ensure_page(client: Any) -> str:
    """The page's address, deploying it where it does not run yet."""
    from lyra_ray.page.deploy import deploy_page, running_page

    url = running_page()
    if url is not None:
        return url
    cfg = client.call("ping")["config"]
    return deploy_page(cfg["serve_host"], int(cfg["serve_port"]), dashboard_url())


def dashboard_url() -> str | None:
    """The Ray dashboard of the connected cluster, for the page's links."""
    try:
        from ray._private.worker import get_dashboard_url

        raw = str(get_dashboard_url() or "")  # type: ignore[no-untyped-call]
    except Exception:  # private API gone: the page shows no dashboard links
        return None
    return raw if not raw or raw.startswith("http") else f"http://{raw}"


def _page(args: argparse.Namespace) -> int:
    from lyra_ray.cli.live import _client
    from lyra_ray.page.deploy import login_link

    c = _client(args.address)
    who = c.whoami()  # a refused token fails here, before any link is printed
    url = ensure_page(c)
    print(login_link(url, c.token))
    print(
        f"the operator's page for {who['name']!r}"
        + (" (an admin: every job)" if who.get("admin") else " (your jobs)")
        + "; the link holds your token: open it yourself, do not share it"
    )
    return 0
