"""``lyra status --watch``: a live view an operator can leave open.

:func:`render` turns one ``overview()`` (what ``lyra status --json`` prints) into rich
renderables, and is a plain function of that dict so it can be tested without a
cluster; :func:`watch` refreshes it in place. Everything fits 80 columns: job ids are
never cut (two jobs must not look alike), names are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text


def _pools(view: Mapping[str, Any]) -> Table:
    """GPUs per pool and type: how many train, serve, are lent or sit idle."""
    nodes = {n["id"]: n for n in view["nodes"]}
    used: dict[str, int] = {}
    for j in view["jobs"]:
        a = j.get("assignment")
        if a and j["status"] == "running":
            for node, g in a["nodes"]:
                used[node] = used.get(node, 0) + int(g)
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for n in nodes.values():
        r = rows.setdefault(
            (n["pool"], n["gpu_type"]),
            dict.fromkeys(("nodes", "gpus", "train", "serve", "lent", "idle"), 0),
        )
        g, busy = int(n["gpus"]), min(int(n["gpus"]), used.get(n["id"], 0))
        r["nodes"] += 1
        r["gpus"] += g
        if n["pool"] != "inference":
            r["train"] += busy
            r["idle"] += g - busy
        elif n["state"] in ("lent", "draining"):
            r["lent"] += busy
            r["idle"] += g - busy
        else:
            r["serve"] += g
    t = Table(title="pools", title_justify="left", expand=False)
    for col in ("pool", "GPU", "nodes", "GPUs", "train", "serve", "lent", "idle"):
        t.add_column(col, justify="left" if col in ("pool", "GPU") else "right")
    for (pool, gpu), r in sorted(rows.items()):
        t.add_row(
            pool, gpu, *(str(r[k]) for k in ("nodes", "gpus", "train", "serve", "lent", "idle"))
        )
    return t


def _servers(view: Mapping[str, Any]) -> Table | None:
    infer = [n for n in view["nodes"] if n["pool"] == "inference"]
    if not infer:
        return None
    serving = view["serving"]
    t = Table(
        title=f"inference servers (serving needs {serving['demand_servers']})",
        title_justify="left",
    )
    for col in ("server", "GPU", "GPUs", "state"):
        t.add_column(col)
    for n in infer:
        t.add_row(n["id"][:12], n["gpu_type"], str(n["gpus"]), n["state"])
    return t


def _running(view: Mapping[str, Any]) -> Table:
    t = Table(title="running", title_justify="left")
    for col, just in (("job", "left"), ("GPUs", "left"), ("progress", "left"), ("steps", "right")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for j in view["jobs"]:
        if j["status"] != "running":
            continue
        a = j.get("assignment") or {}
        total = float(j.get("total_steps") or 0)
        done = float(j.get("steps_done") or 0)
        bar = ProgressBar(total=max(total, 1.0), completed=min(done, total), width=20)
        t.add_row(
            str(j["id"]),
            f"{a.get('gpu_type', '-')} x {a.get('workers', 0)}",
            bar,
            f"{done:,.0f}/{total:,.0f}",
        )
    return t


def _queue(view: Mapping[str, Any], now: float) -> Table:
    t = Table(title="queue", title_justify="left")
    for col in ("job", "state", "workers", "waiting"):
        t.add_column(col, no_wrap=True)
    waiting = [j for j in view["jobs"] if j["status"] in ("queued", "preempted", "submitted")]
    for j in waiting:
        lo, hi = j.get("min_workers"), j.get("max_workers")
        workers = str(lo) if lo == hi else f"{lo}-{hi}"
        t.add_row(str(j["id"]), str(j["status"]), workers, f"{float(j.get('queued_s', 0)):.0f} s")
    return t


def header(view: Mapping[str, Any], now: float) -> Text:
    """One line: policy, round, time to the next, job counts."""
    r = view.get("rounds") or {}
    states: dict[str, int] = {}
    for j in view["jobs"]:
        states[j["status"]] = states.get(j["status"], 0) + 1
    parts = [f"lyra: policy {r.get('policy', '?')}"]
    nxt = r.get("next_round_s")
    if nxt is not None:
        parts.append(
            f"round {int(r.get('rounds_done', 0)) + 1}, next in {max(0.0, nxt - now):.0f} s"
        )
    else:
        parts.append("no rounds running")
    parts.append(", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no jobs")
    return Text(" | ".join(parts), style="bold")


def render(view: Mapping[str, Any], now: float | None = None) -> RenderableType:
    now = time.time() if now is None else now
    parts: list[RenderableType] = [header(view, now), _pools(view)]
    servers = _servers(view)
    if servers is not None:
        parts.append(servers)
    parts += [_running(view), _queue(view, now)]
    lent = sum(1 for n in view["nodes"] if n["state"] == "lent")
    reclaims = view["serving"].get("reclaims", [])
    if lent or reclaims:
        last = reclaims[-1]["latency_s"] if reclaims else None
        parts.append(
            Text(
                f"loans: {lent} server(s) lent, {len(reclaims)} reclaimed"
                + (f" (last took {last:.1f} s)" if last is not None else "")
            )
        )
    return Group(*parts)


def watch(fetch: Callable[[], Mapping[str, Any]], every_s: float) -> int:
    """Refresh the view every ``every_s`` seconds until Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    console = Console()
    with Live(render(fetch()), console=console, auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(every_s)
                live.update(render(fetch()), refresh=True)
        except KeyboardInterrupt:
            pass
    console.print("stopped watching (the cluster keeps running)")
    return 0
