"""``lyra dashboard export|push``: lyra's Grafana dashboard, as a file or into a Grafana.

``export`` writes the JSON model that :func:`lyra_ray.telemetry.dashboard.build_dashboard`
builds; ``push`` uploads exactly that JSON through ``grafana-client`` (the maintained fork
of the unmaintained ``grafana-api``, same API), so what a test checks in a file is what
lands in Grafana. The token comes from an environment variable, never from the command
line, where ``ps`` and shell history would show it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lyra_ray.model.errors import InputError

PUSH_TIMEOUT_S = 10.0


def register(sub: Any) -> None:
    grp = sub.add_parser("dashboard", help="lyra's Grafana dashboard (export, push)")
    cmds = grp.add_subparsers(dest="dashboard_command", metavar="SUBCOMMAND", required=True)

    p = cmds.add_parser("export", help="write the dashboard's JSON model to FILE")
    p.add_argument("file", help="where to write the JSON")
    p.set_defaults(func=_export)

    p = cmds.add_parser("push", help="upload the dashboard to a Grafana (overwrites it)")
    p.add_argument("--grafana-url", required=True, help="e.g. http://localhost:3000")
    p.add_argument("--folder-uid", default=None, help="Grafana folder to put it in")
    p.add_argument(
        "--token-env",
        default="GRAFANA_TOKEN",
        help="environment variable holding a Grafana service-account token",
    )
    p.set_defaults(func=_push)


def _summary(dashboard: dict[str, Any]) -> str:
    from lyra_ray.telemetry.dashboard import iter_panels, prometheus_queries

    panels = sum(1 for _ in iter_panels(dashboard))
    queries = len(prometheus_queries(dashboard))
    return f"'{dashboard['title']}' (uid {dashboard['uid']}, {panels} panels, {queries} queries)"


def _export(args: argparse.Namespace) -> int:
    from lyra_ray.telemetry.dashboard import build_dashboard

    dashboard = build_dashboard()
    path = Path(args.file)
    try:
        path.write_text(json.dumps(dashboard, indent=2) + "\n")
    except OSError as e:
        raise InputError(f"{args.file}: cannot write ({e.strerror or e})") from None
    print(f"wrote dashboard {_summary(dashboard)} to {path}")
    return 0


def _grafana_url(url: str) -> tuple[str, str]:
    """The URL to call, and its origin without user or password, for messages."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--grafana-url: expected http(s)://HOST[:PORT][/PATH], got {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"--grafana-url: bad port in {url!r}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    origin = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    return url.rstrip("/"), origin


def _grafana_message(response: object, fallback: str) -> str:
    if isinstance(response, dict) and response.get("message"):
        return str(response["message"])
    if isinstance(response, str) and response.strip():
        return response.strip().splitlines()[0]
    return fallback


def _push(args: argparse.Namespace) -> int:
    url, origin = _grafana_url(args.grafana_url)
    token = os.environ.get(args.token_env, "").strip()
    if not token:
        raise InputError(
            f"environment variable {args.token_env} is not set: put a Grafana "
            "service-account token in it (or name another variable with --token-env)"
        )

    from grafana_client.api import GrafanaApi
    from grafana_client.client import GrafanaException, TokenAuth
    from requests.exceptions import RequestException

    from lyra_ray.telemetry.dashboard import build_dashboard

    dashboard = build_dashboard()
    body: dict[str, Any] = {
        "dashboard": dashboard,
        "overwrite": True,
        "message": "lyra dashboard push",
    }
    if args.folder_uid:
        body["folderUid"] = args.folder_uid
    auth = TokenAuth(token)  # type: ignore[no-untyped-call]
    api: Any = GrafanaApi.from_url(url, credential=auth, timeout=PUSH_TIMEOUT_S)
    try:
        reply = api.dashboard.update_dashboard(body)
    except GrafanaException as e:
        status = e.status_code or "no answer"
        print(
            f"lyra: error: Grafana at {origin} refused the dashboard: {status}: "
            f"{_grafana_message(e.response, e.message)}",
            file=sys.stderr,
        )
        return 1
    except RequestException as e:
        print(f"lyra: error: cannot reach Grafana at {origin}: {e}", file=sys.stderr)
        return 1
    # Grafana's reply names the dashboard's path, sub-path included (``/d/<uid>/<slug>``).
    reply = reply if isinstance(reply, dict) else {}
    where = origin + str(reply.get("url", ""))
    version = reply.get("version", "?")
    print(f"pushed dashboard {_summary(dashboard)} to {where} (version {version})")
    return 0
