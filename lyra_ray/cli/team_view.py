"""How ``lyra status`` and ``lyra team list`` show teams: one compact line each, within
80 columns (amounts by GPU type, or V100-equivalents for an effective quota)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def amounts(a: Mapping[str, float] | None, unlimited: str = "no limit") -> str:
    """``v100=4 k80=2``; ``8 v100-eq`` for an effective amount; ``-`` for nothing."""
    if a is None:
        return unlimited
    parts = [
        f"{v:g} v100-eq" if k == "effective" else f"{k}={v:g}" for k, v in sorted(a.items()) if v
    ]
    return " ".join(parts) or "-"


def print_teams(teams: list[dict[str, Any]]) -> None:
    """The teams table under the servers; nothing while only ``default`` exists."""
    if not any(t.get("guarantee") is not None for t in teams):
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(title="teams", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("team", "guarantee", "used", "borrowed", "lent"):
        t.add_column(col, no_wrap=col == "team")
    for row in teams:
        t.add_row(
            str(row["name"]),
            amounts(row.get("guarantee")),
            amounts(row.get("used")),
            amounts(row.get("borrowed")),
            amounts(row.get("lent")),
        )
    Console(width=min(Console().width, 100)).print(t)


def team_line(t: Mapping[str, Any]) -> str:
    """One team's settings and members (``lyra team list``/``add``/``set``): two lines of
    at most 80 columns (a long member list is cut, saying how many are left out)."""
    limits = []
    if t.get("borrow_limit") is not None:
        limits.append(f"borrow<={t['borrow_limit']:g}")
    if t.get("lend_limit") is not None:
        limits.append(f"lend<={t['lend_limit']:g}")
    if not t.get("preemptible", True):
        limits.append("not preemptible")
    head = f"{t['name']}: quota {amounts(t.get('quota'))}, weight {t.get('weight', 1.0):g}"
    head += f", {', '.join(limits)}" if limits else ""
    members = list(t.get("members") or [])
    shown = ""
    for i, m in enumerate(members):
        rest = len(members) - i - 1
        more = f" (+{rest} more)" if rest else ""
        if len("  members: " + shown + m + more) > 80:
            shown = shown.rstrip(", ") + f" (+{len(members) - i} more)"
            break
        shown += m + (", " if rest else "")
    if not shown:
        shown = "every user in no other team" if t["name"] == "default" else "none"
    return head[:80] + "\n  members: " + shown
