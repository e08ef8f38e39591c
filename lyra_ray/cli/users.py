"""``lyra user add|move|token|remove|list|whoami``: identities on a live cluster.

Admins create users and hand each their token, which is printed once (the scheduler
keeps only a salted hash); ``whoami`` tells any caller which identity its token is.
See :mod:`lyra_ray.runtime.auth` for the rules.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("user", help="users and their tokens (admins)")
    users = p.add_subparsers(dest="user_command", metavar="ACTION", required=True)

    q = users.add_parser("add", help="create a user; prints its token once")
    q.add_argument("name")
    q.add_argument("--admin", action="store_true", help="may manage users and every job")
    q.add_argument("--team", default=None, help="the user's team (default: default)")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_add)

    q = users.add_parser("move", help="put a user in another team")
    q.add_argument("name")
    q.add_argument("--team", required=True)
    q.add_argument("--address", default=None)
    q.set_defaults(func=_move)

    q = users.add_parser("token", help="issue another token for a user; printed once")
    q.add_argument("name")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_token)

    q = users.add_parser("remove", help="delete a user and all their tokens")
    q.add_argument("name")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_remove)

    q = users.add_parser("list", help="every user")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_list)

    q = users.add_parser("whoami", help="the identity of your token")
    q.add_argument("--address", default=None)
    q.set_defaults(func=_whoami)


def _client(address: str | None) -> Any:
    from lyra_ray.cli.live import _client as client

    return client(address)


def _show_token(name: str, token: str) -> None:
    print(token)
    print(
        f"token for {name!r} above, shown this once (lyra keeps only its hash); "
        f"they run: export LYRA_TOKEN=<token>",
        file=sys.stderr,
    )


def _add(args: argparse.Namespace) -> int:
    token = _client(args.address).add_user(args.name, admin=args.admin, team=args.team)
    _show_token(args.name, token)
    team = f" in team {args.team}" if args.team else ""
    print(f"created {'admin' if args.admin else 'user'} {args.name}{team}")
    return 0


def _move(args: argparse.Namespace) -> int:
    _client(args.address).move_user(args.name, args.team)
    print(f"moved {args.name} to team {args.team} (their jobs keep the team they ran under)")
    return 0


def _token(args: argparse.Namespace) -> int:
    token = _client(args.address).issue_token(args.name)
    _show_token(args.name, token)
    print(f"issued a new token for {args.name}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    _client(args.address).remove_user(args.name)
    print(f"removed user {args.name} and their tokens (their jobs stay theirs)")
    return 0


def _list(args: argparse.Namespace) -> int:
    rows = _client(args.address).users()
    for r in rows:
        print(f"{r['name']}\t{'admin' if r['admin'] else 'user'}")
    print(f"{len(rows)} user(s)")
    return 0


def _whoami(args: argparse.Namespace) -> int:
    me = _client(args.address).whoami()
    if not me["identities"]:
        print("this cluster runs open (no users): every call is allowed")
    else:
        print(f"you are {me['name']}{' (admin)' if me['admin'] else ''}")
    return 0
