"""How ``lyra status`` and ``lyra team list`` show teams: one compact line each, within
80 columns (amounts by GPU type, or GPUs of the reference type for an effective quota)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def amounts(
    a: Mapping[str, float] | None, unlimited: str = "no limit", reference: str | None = None
) -> str:
    """``v100=4 k80=2``; ``8 h200-eq`` for an effective amount (GPUs of the reference
    type); ``-`` for nothing."""
    if a is None:
        return unlimited
    eq = f"{reference or 'ref'}-eq"
    parts = [
        f"{v:.4g} {eq}" if k == "effective" else f"{k}={v:g}" for k, v in sorted(a.items()) if v
    ]
    return " ".join(parts) or "-"


def print_teams(teams: list[dict[str, Any]], settings: Mapping[str, Any] | None = None) -> None:
    """The teams table under the servers; nothing while only ``default`` exists. Below
    it: an oversubscribed cluster, and jobs counted without a rate of their own."""
    if not any(t.get("guarantee") is not None for t in teams):
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    ref = next((t.get("reference") for t in teams if t.get("reference")), None)
    title = "teams" + (f" (effective: GPUs of {ref})" if ref else "")
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("team", "guarantee", "used", "borrowed", "lent"):
        t.add_column(col, no_wrap=col == "team")
    for row in teams:
        t.add_row(
            str(row["name"]),
            amounts(row.get("guarantee"), reference=ref),
            amounts(row.get("used"), reference=ref),
            amounts(row.get("borrowed"), reference=ref),
            amounts(row.get("lent"), reference=ref),
        )
    console = Console(width=min(Console().width, 100))
    console.print(t)
    why = (settings or {}).get("oversubscribed")
    if why:
        console.print(f"[yellow]oversubscribed: {why}; not every guarantee can be met[/]")
    for row in teams:
        for note in row.get("notes") or ():
            console.print(f"  {row['name']}: {note}", soft_wrap=True)


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
