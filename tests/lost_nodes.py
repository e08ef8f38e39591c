"""Which Ray nodes a failed live test's cluster lost, with their raylets' last words.

WHY: once (whole run 30, docs/testing.md) four live loaning tests failed in a row by
waiting in vain; an inference node's raylet had died two seconds after it registered,
and the reports said only what did not happen. Every node of an embedded cluster writes
its raylet's log into the one session directory (``raylet.out``, ``raylet.1.out``, ...),
each file naming its node on a line ``Setting node ID node_id=<hex>``, so a dead node's
files are found by its id and read before the module's fixture removes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ID_MARK = "node_id="


def _node_files(logs_dir: Path) -> dict[str, Path]:
    """Each node id to its raylet's ``.out`` file, from the file's first lines."""
    out: dict[str, Path] = {}
    for path in sorted(logs_dir.glob("raylet*.out")):
        try:
            with path.open(errors="replace") as f:
                head = [next(f, "") for _ in range(50)]
        except OSError:
            continue
        for line in head:
            if "Setting node ID" in line and ID_MARK in line:
                out[line.split(ID_MARK, 1)[1].split()[0]] = path
                break
    return out


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def lost_nodes_report(nodes: Iterable[Mapping[str, Any]], logs_dir: Path, lines: int = 20) -> str:
    """Every node of ``nodes`` (``ray.nodes()``) that is not alive: its id, labels and
    death fields, and the tail of its raylet's ``.out`` and ``.err``; ``""`` if none."""
    files = _node_files(logs_dir) if logs_dir.is_dir() else {}
    parts: list[str] = []
    for n in nodes:
        if n.get("Alive", True):
            continue
        nid = str(n.get("NodeID", "?"))
        labels = n.get("Labels") or {}
        said = {k: v for k, v in n.items() if "death" in k.lower() and v}
        parts.append(f"node {nid} lost (labels {dict(labels)}; {said or 'no death reason'})")
        out = files.get(nid)
        if out is None:
            parts.append("  (no raylet log names it)")
            continue
        for path in (out, out.with_suffix(".err")):
            tail = _tail(path, lines)
            parts.append(f"  {path.name}, last {len(tail)} lines:")
            parts.extend(f"    {ln}" for ln in tail)
    return "\n".join(parts)
