"""Which lines of a command's output are Ray's or Serve's own log lines.

Shared by the tests that hold lyra's commands to "no Ray or Serve log lines unless -v":
the README's live block and ``lyra moe serve``.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PATTERNS = (
    # a worker's or raylet's line forwarded to the driver: "(raylet) ...", "(pid=12) ...",
    # "(ServeController pid=12) ...", "(ServeReplica:app:dep pid=12) ..."
    re.compile(r"^\((raylet|pid=\d+|[\w:.\-]+ pid=\d+)[^)]*\)"),
    # Ray's Python logging format: "2026-11-24 10:59:28,718\tINFO worker.py:1841 -- ..."
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING|ERROR|DEBUG|ERR|SUCC)\s"),
    # Serve's component format: "INFO 2026-11-24 10:59:28,718 serve 19370 -- ..."
    re.compile(r"^(INFO|WARNING|ERROR|DEBUG) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ "),
    re.compile(r"Connecting to existing Ray cluster|Started a local Ray instance"),
)


def ray_log_lines(text: str) -> list[str]:
    """The lines of ``text`` that Ray or Serve logged (colour codes ignored)."""
    out = []
    for line in text.splitlines():
        plain = ANSI.sub("", line).strip()
        if any(p.search(plain) for p in PATTERNS):
            out.append(plain)
    return out
