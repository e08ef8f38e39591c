"""The ``lyra`` command line: one dispatcher, each command group in its own module.

Bad input raises :class:`InputError` anywhere below; it is printed as one line on
stderr with exit code 2 — never a traceback — because the user, not the code, has to
fix it. A refused lyra token (:class:`lyra_ray.contract.errors.AuthError`, a
``PermissionError``) is one line too, exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from lyra_ray import __version__
from lyra_ray.contract.errors import LyraError
from lyra_ray.model.errors import InputError

# Command groups that register themselves on the parser; a group whose optional
# dependencies are missing is skipped rather than breaking every other command.
_GROUPS = (
    "lyra_ray.cli.sim",
    "lyra_ray.cli.live",
    "lyra_ray.cli.users",
    "lyra_ray.cli.teams",
    "lyra_ray.cli.serve",
    "lyra_ray.cli.dashboard",
    "lyra_ray.cli.plan",
    "lyra_ray.cli.profile",
    "lyra_ray.cli.moe_serve",
    "lyra_ray.cli.page",
    "lyra_ray.cli.fake_cluster",
)
_ALONE = {"simulate": "lyra_ray.cli.sim"}
"""Commands whose group alone builds their parser. Importing every group costs ~0.1 s
(Rich, the MoE planner, the live client), which a replay's whole-process time counts
(``benchmarks/sim_speed.py`` times ``lyra simulate`` against Gavel's simulator); the
parsed arguments are the same (``tests/unit/test_cli_fast_parser.py``)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every group's commands; only ``command``'s group where :data:`_ALONE` names it."""
    parser = argparse.ArgumentParser(
        prog="lyra", description="lyra-ray: a cluster manager for heterogeneous GPU clusters"
    )
    parser.add_argument("--version", action="version", version=f"lyra-ray {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in (_ALONE[command],) if command in _ALONE else _GROUPS:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name is not None and mod.startswith(e.name):
                continue
            raise
        module.register(sub)
    return parser


def _command(words: list[str]) -> str | None:
    """The command ``words`` run; ``None`` where the top-level parser itself answers
    (``lyra --help``, ``lyra --version``: it must list every command). The top-level
    options take no value, so the first word that is no option is the command."""
    for w in words:
        if w in ("-h", "--help", "--version"):
            return None
        if not w.startswith("-"):
            return w
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(_command(list(sys.argv[1:] if argv is None else argv)))
    args = parser.parse_args(argv)
    # A call without argv is the process's own command line (the ``lyra`` script): only
    # then may ``simulate`` swap in the compiled core (lyra_ray/native.py); an in-process
    # call, as the tests make, keeps the modules its process already uses.
    args.own_process = argv is None
    from lyra_ray.client.quiet import quiet_loggers, set_verbose

    set_verbose(bool(args.verbose))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    quiet_loggers()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except InputError as e:
        print(f"lyra: error: {e}", file=sys.stderr)
        return 2
    except (PermissionError, LyraError) as e:
        # a refused lyra token (AuthError), an unreadable file; a scheduler that is not
        # there or did not answer in time (the SDK's LyraError): one line, not a traceback
        print(f"lyra: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
