"""How ``lyra status`` shows jobs, servers and pairs: the table at 80 columns, the
``--json`` rows, and the notes under the table (why a job waits, ignored GPU types)."""

from __future__ import annotations

from typing import Any


def absent_gpu_types(raw: dict[str, Any], have: set[str]) -> set[str]:
    """The GPU types a job's throughput table names that the cluster does not have:
    they are ignored (the table says what the job *can* run on), which a user should
    see rather than wonder why a job never lands there."""
    table = raw.get("throughput")
    if not isinstance(table, dict):
        return set()
    return {str(g).lower() for g in table} - have


def _print_ignored(view: dict[str, Any]) -> None:
    """A note per job still to run whose throughput table names GPU types the cluster
    lacks: they are ignored, and the user should see it here, not only at submit."""
    have = {str(n["gpu_type"]).lower() for n in view.get("nodes", [])}
    for r in view.get("jobs", []):
        if r.get("status") in ("finished", "cancelled", "failed"):
            continue
        absent = sorted(absent_gpu_types(r, have))
        if absent:
            print(f"  note: {r['id']} names GPU types this cluster lacks, ignored: {absent}")


def _fmt_assign(a: dict[str, Any] | None) -> str:
    """``v100 x 2``; ``v100 x 2 shared`` for one job of a space-sharing pair (Gavel's
    packed policies: its workers hold half of the same GPUs as its partner's)."""
    if not a:
        return "-"
    return f"{a['gpu_type']} x {a['workers']}" + (" shared" if a.get("partner") else "")


def _print_pairs(rows: list[dict[str, Any]]) -> None:
    """One line per space-sharing pair shown, so the partner is named once."""
    seen: set[str] = set()
    for r in rows:
        partner = (r.get("assignment") or {}).get("partner")
        if partner and r["id"] not in seen:
            seen.update((r["id"], str(partner)))
            print(f"  {r['id']} and {partner} share their GPUs (space sharing)")


def _print_table(rows: list[dict[str, Any]], wide: bool = False) -> None:
    """Jobs, one per line. The id is never cut (two jobs must not look alike); at 80
    columns the other cells give way. ``wide``: also user, generation and reason."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(title="lyra jobs", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("job", no_wrap=True)
    for col in ("state", "GPUs", "steps", "queued", "run"):
        t.add_column(col, justify="right" if col in ("steps", "queued", "run") else "left")
    if wide:
        for col in ("user", "gen", "ray job", "reason"):
            t.add_column(col)
    for r in rows:
        total = float(r.get("total_steps") or 0)
        done = float(r.get("steps_done") or 0)
        cells = [
            str(r["id"]),
            str(r["status"]),
            _fmt_assign(r.get("assignment")),
            f"{done:.0f}/{total:.0f}" if total else "-",
            f"{float(r.get('queued_s') or 0):.0f}s",
            f"{float(r.get('run_s') or 0):.0f}s",
        ]
        if wide:
            cells += [
                str(r.get("user", "")),
                str(r.get("generation", "")),
                str(r.get("ray_job") or ""),
                r.get("reason") or "",
            ]
        t.add_row(*cells)
    console = Console(width=None if wide else min(Console().width, 100))
    console.print(t)
    if not wide:
        for r in rows:
            if r.get("reason_code"):  # a waiting job: why
                console.print(
                    f"{r['id']} waits ({r['reason_code']}): {r['reason']}", overflow="fold"
                )
            elif r.get("reason"):
                console.print(f"{r['id']}: {r['reason']}", overflow="fold")


def job_row(r: dict[str, Any]) -> dict[str, Any]:
    """A job as ``lyra status --json`` prints it."""
    a = r.get("assignment") or {}
    return {
        "id": r["id"],
        "name": r.get("name"),
        "state": r["status"],
        "workers": int(a.get("workers", 0)),
        "gpu_type": a.get("gpu_type"),
        "partner": a.get("partner"),
        "steps": r.get("steps_done", 0),
        "total_steps": r.get("total_steps"),
        "user": r.get("user"),
        "team": r.get("team"),
        "generation": r.get("generation"),
        "ray_job": r.get("ray_job"),
        "queued_s": r.get("queued_s"),
        "reason": r.get("reason"),
        "reason_code": r.get("reason_code"),
        "last_restart": r.get("last_restart"),
    }


def status_json(view: dict[str, Any]) -> dict[str, Any]:
    """``nodes``, ``jobs``, ``serving`` (``demand_servers``, ``services``), ``teams``
    (each team's ``name``, ``unit``, ``guarantee``, ``used``, ``borrowed``, ``lent``,
    ``reference``, ``notes``), ``team_settings`` (``reference``, ``reference_in_force``,
    ``enforce``, ``oversubscribed``)."""
    serving = view["serving"]
    return {
        "rounds": view.get("rounds", {}),
        "nodes": view["nodes"],
        "jobs": [job_row(r) for r in view["jobs"]],
        "serving": {
            "demand_servers": serving["demand_servers"],
            "services": [
                {k: s[k] for k in ("name", "model", "url", "replicas", "ready")}
                for s in serving["services"]
            ],
        },
        "teams": view.get("teams", []),
        "team_settings": view.get("team_settings", {}),
    }


def _print_servers(view: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    infer = [n for n in view["nodes"] if n["pool"] == "inference"]
    if not infer:
        return
    serving = view["serving"]
    t = Table(title=f"inference servers (serving needs {serving['demand_servers']})")
    for col in ("server", "GPU", "GPUs", "state"):
        t.add_column(col)
    for n in infer:
        t.add_row(n["id"][:12], n["gpu_type"], str(n["gpus"]), n["state"])
    Console().print(t)
    for s in serving["services"]:
        print(f"service {s['name']}: {s['ready']}/{s['replicas']} replicas ready  {s['url']}")
