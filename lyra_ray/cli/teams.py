"""``lyra team add|set|remove|list``: teams, their quotas and borrowing on a live cluster.

Admins manage teams (docs/teams.md); every change is checked whole by the scheduler and
a refused one is one line naming the field, with nothing changed. Memberships:
``lyra user add NAME --team TEAM`` and ``lyra user move NAME --team TEAM``
(:mod:`lyra_ray.cli.users`).
"""

from __future__ import annotations

import argparse
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import GRAMMAR


def register(sub: Any) -> None:
    p = sub.add_parser("team", help="teams, quotas and borrowing (admins)")
    teams = p.add_subparsers(dest="team_command", metavar="ACTION", required=True)

    for action, text in (("add", "create a team"), ("set", "change a team's settings")):
        q = teams.add_parser(action, help=text)
        q.add_argument("name")
        quota = q.add_mutually_exclusive_group(required=action == "add")
        quota.add_argument("--quota", help=f"guaranteed GPUs by type: {GRAMMAR}, e.g. v100=4")
        quota.add_argument(
            "--quota-effective",
            type=float,
            metavar="N",
            help="guarantee N GPUs of the reference type's effective throughput",
        )
        q.add_argument("--weight", type=float, help="share among teams (Gavel's entity weight)")
        q.add_argument("--borrow-limit", type=float, metavar="N", help="most it may borrow")
        q.add_argument("--lend-limit", type=float, metavar="N", help="most of it others borrow")
        if action == "set":
            q.add_argument("--no-borrow-limit", action="store_true", help="clear --borrow-limit")
            q.add_argument("--no-lend-limit", action="store_true", help="clear --lend-limit")
            q.add_argument("--preempt", action="store_true", help="its work may be preempted")
        q.add_argument("--no-preempt", action="store_true", help="its work is never preempted")
        q.add_argument("--address", default=None)
        q.set_defaults(func=_add if action == "add" else _set)

    q = teams.add_parser("remove", help="delete a team (its members go to default)")
    q.add_argument("name")
    q.add_argument("--force", action="store_true", help="cancel its running or queued jobs")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_remove)

    q = teams.add_parser("list", help="every team, its quota, limits and members")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_list)

    q = teams.add_parser(
        "reference", help="the GPU type effective quotas count in (show, or set: admins)"
    )
    q.add_argument("type", nargs="?", help="a GPU type the cluster has, or 'auto'")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_reference)


def _client(address: str | None) -> Any:
    from lyra_ray.cli.live import _client as client

    return client(address)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.quota is not None:
        out["quota"] = args.quota
    if args.quota_effective is not None:
        out["quota_effective"] = args.quota_effective
    for key in ("weight", "borrow_limit", "lend_limit"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    if getattr(args, "no_borrow_limit", False):
        out["borrow_limit"] = None
    if getattr(args, "no_lend_limit", False):
        out["lend_limit"] = None
    if args.no_preempt and getattr(args, "preempt", False):
        raise InputError("team: give --preempt or --no-preempt, not both")
    if args.no_preempt:
        out["preemptible"] = False
    elif getattr(args, "preempt", False):
        out["preemptible"] = True
    return out


def _add(args: argparse.Namespace) -> int:
    from lyra_ray.cli.team_view import team_line

    t = _client(args.address).add_team(args.name, **_settings(args))
    print(team_line(t))
    print(f"created team {args.name}")
    return 0


def _set(args: argparse.Namespace) -> int:
    from lyra_ray.cli.team_view import team_line

    settings = _settings(args)
    if not settings:
        raise InputError("team set: give at least one setting to change (see --help)")
    t = _client(args.address).set_team(args.name, **settings)
    print(team_line(t))
    print(f"changed team {args.name}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    out = _client(args.address).remove_team(args.name, force=args.force)
    gone = out.get("cancelled") or []
    for jid in gone:
        print(f"cancelled {jid}")
    print(f"removed team {args.name}; its members are in team default now")
    return 0


def _list(args: argparse.Namespace) -> int:
    from lyra_ray.cli.team_view import team_line

    rows = _client(args.address).teams()
    for t in rows:
        print(team_line(t))
    print(f"{len(rows)} team(s)")
    return 0


def _reference(args: argparse.Namespace) -> int:
    out = _client(args.address).team_reference(args.type)
    ref, used = out.get("reference"), out.get("reference_in_force")
    where = f"{used} (the cluster's most common training type)" if ref == "auto" else str(used)
    print(f"effective quotas count GPUs of {where}")
    if out.get("oversubscribed"):
        print(f"oversubscribed: {out['oversubscribed']}")
    return 0
