"""Ending the process groups lyra starts, by PID, never with ``ray stop``.

Every Ray node, Prometheus and ``lyra up --local`` start their processes each in a
session of its own; its process group is what they end. One way for all of them
because the hard parts are the same: ``os.killpg(pgid, 0)`` still succeeds while only
zombies are left (a group we started ourselves and have not reaped), and a node's
processes may outlive the ``ray start`` that led the group. So a group counts as ended
when ``/proc`` lists none of its processes alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

SETTLE_S = 10.0
"""How long to wait, after SIGKILL, for the kernel to take the processes away."""


def members(pgid: int) -> list[tuple[int, list[str]]]:
    """(pid, argv) of the live (not zombie) processes of group ``pgid``, from ``/proc``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z" or int(fields[2]) != pgid:
                continue
            raw = (stat.parent / "cmdline").read_bytes()
            out.append((int(stat.parent.name), [a.decode() for a in raw.split(b"\0") if a]))
    return out


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (children, their children, ...), from ``/proc``."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    out: list[int] = []
    frontier = {root}
    while frontier:
        frontier = {pid for pid, pp in parent.items() if pp in frontier} - set(out)
        out += sorted(frontier)
    return out


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _reap(pgid: int) -> None:
    """Collect the group's leader if it is our child (else it stays a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pgid, os.WNOHANG)


def _live_groups(pgids: list[int]) -> set[int]:
    """Which of ``pgids`` still have a live (not zombie) process: one pass over ``/proc``
    for all of them (each check runs several times a second while a group ends)."""
    wanted, out = set(pgids), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) in wanted:
                out.add(int(fields[2]))
    return out


def _wait_empty(pgids: list[int], seconds: float, every: float) -> list[int]:
    """Wait until no group has a live process or ``seconds`` passed; the groups left."""
    deadline = time.monotonic() + seconds
    left = pgids
    while left:
        for p in left:
            _reap(p)
        alive = _live_groups(left)
        left = [p for p in left if p in alive]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(every)
    return left


def end_groups(pgids: Iterable[int], grace_s: float) -> None:
    """SIGTERM every group in the order given (SIGKILL at once when ``grace_s`` is 0),
    wait up to ``grace_s`` for all of them to end, SIGKILL what is left, and wait until
    it is gone (at most ``SETTLE_S``)."""
    groups = [p for p in pgids if p > 0]
    for p in groups:
        _signal(p, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    left = _wait_empty(groups, grace_s, 0.2) if grace_s > 0 else groups
    for p in left:
        _signal(p, signal.SIGKILL)
    _wait_empty(left, SETTLE_S, 0.1)
