"""``lyra up|down|submit|status|cancel|logs``: the live-cluster commands.

Registered on the lead's dispatcher (:mod:`lyra_ray.cli`). Bad input raises
:class:`InputError` (exit code 2, one line, no traceback); an unreachable cluster or a
refused token is a one-line error with exit code 1. ``lyra user ...``:
:mod:`lyra_ray.cli.users`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError


def register(sub: Any) -> None:
    p = sub.add_parser("up", help="start a local multi-node Ray cluster + the scheduler")
    p.add_argument("--local", action="store_true", help="fake-GPU nodes on this host")
    p.add_argument("--nodes", default="v100=2x4,p100=2x4,k80=2x4", help="TYPE=NODESxGPUS,...")
    p.add_argument(
        "--inference", default=None, help="inference-pool nodes, TYPE=NODESxGPUS (t4=2x2)"
    )
    p.add_argument("--config", help="cluster.yaml (its `lyra:` section configures the scheduler)")
    p.add_argument("--policy", help="override the policy of the lyra section")
    p.add_argument("--round-seconds", type=float, help="override round_s")
    p.add_argument(
        "--throughputs",
        metavar="FILE",
        help="a throughput table (lyra profile's JSON) that seeds the scheduler's model",
    )
    p.add_argument("--dir", default=None, help="where lyra keeps its PIDs/state (default ~/.lyra)")
    p.add_argument(
        "--prometheus", action="store_true", help="also start Prometheus scraping the cluster"
    )
    p.set_defaults(func=_up)

    p = sub.add_parser("down", help="stop what `lyra up` started (by PID; never `ray stop`)")
    p.add_argument("--dir", default=None)
    p.set_defaults(func=_down)

    p = sub.add_parser("submit", help="submit the jobs of a YAML job list")
    p.add_argument("file")
    p.add_argument("--address", default=None)
    p.add_argument(
        "--working-dir",
        default=None,
        metavar="DIR",
        help="run the jobs' code from DIR (uploaded; inside `ray job submit` the job's own)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="block until every job has ended; SIGTERM/SIGINT (`ray job stop`) cancels them",
    )
    p.add_argument("--timeout", type=float, default=None)
    p.set_defaults(func=_submit)

    p = sub.add_parser("status", help="a table of jobs (or one job)")
    p.add_argument("job_id", nargs="?")
    p.add_argument("--address", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--wide", action="store_true", help="every column, nothing cut")
    p.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        default=0.0,
        metavar="SECONDS",
        help="a live view, refreshed every SECONDS (default 2); Ctrl-C leaves it",
    )
    p.set_defaults(func=_status)

    p = sub.add_parser("cancel", help="cancel a job")
    p.add_argument("job_id")
    p.add_argument("--address", default=None)
    p.set_defaults(func=_cancel)

    p = sub.add_parser("logs", help="a job's run history and its latest run's log")
    p.add_argument("job_id")
    p.add_argument("--address", default=None)
    p.add_argument("--tail", type=int, default=100)
    p.set_defaults(func=_logs)


def _client(address: str | None) -> Any:
    from lyra_ray.sdk import Client, LyraError

    try:
        return Client(address)
    except (LyraError, ConnectionError) as e:
        print(f"lyra: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None


def _submit(args: argparse.Namespace) -> int:
    from lyra_ray.model.spec import load_job_entries

    entries = load_job_entries(args.file)  # shape errors before touching the cluster
    extra = None
    if args.working_dir is not None:
        if not Path(args.working_dir).is_dir():
            raise InputError(f"--working-dir: {args.working_dir!r} is not a directory")
        extra = {"working_dir": args.working_dir}
    from lyra_ray.cli.stop import Stopped, StopSignals, cancel_on_stop

    c = _client(args.address)
    stop = StopSignals(args.wait)
    with stop:
        ids = c.submit_entries(entries, extra, base=Path(args.file).parent)
        _print_submitted(c, ids, entries)
        if not args.wait:
            print(f"submitted {len(ids)} job(s); follow them with `lyra status --watch`")
            return 0
        try:
            stop.arm()
            results = [c.wait(j, timeout=args.timeout) for j in ids]
        except Stopped as e:
            return cancel_on_stop(c, ids, e.signum)
    _print_table(results)
    bad = [f"{r['id']} {r['status']}" for r in results if r["status"] != "finished"]
    done = len(results) - len(bad)
    print(f"{done} of {len(results)} job(s) finished" + (f"; not: {', '.join(bad)}" if bad else ""))
    return 0 if not bad else 1


def _print_submitted(c: Any, ids: list[str], entries: list[dict[str, Any]]) -> None:
    if c.dropped_env:
        print(f"  note: the driver's runtime env keys {c.dropped_env} do not travel with jobs")
    have = {str(n["gpu_type"]).lower() for n in c.overview()["nodes"]}
    for jid, raw in zip(ids, entries, strict=True):
        print(jid, flush=True)
        if c.ray_job:  # what the Ray dashboard's job log shows: the link both ways
            print(f"  lyra job {jid} submitted by Ray job {c.ray_job}", flush=True)
        absent = sorted(absent_gpu_types(raw, have))
        if absent:
            print(f"  note: {raw['name']} names GPU types this cluster lacks, ignored: {absent}")


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
        failed = [r for r in rows if r.get("reason")]
        for r in failed:
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
        "generation": r.get("generation"),
        "ray_job": r.get("ray_job"),
        "queued_s": r.get("queued_s"),
        "reason": r.get("reason"),
        "last_restart": r.get("last_restart"),
    }


def status_json(view: dict[str, Any]) -> dict[str, Any]:
    """``nodes``, ``jobs``, ``serving`` (``demand_servers``, ``services``)."""
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


def _status(args: argparse.Namespace) -> int:
    import math

    if not (args.watch == 0 or (math.isfinite(args.watch) and 0.1 <= args.watch <= 3600)):
        raise InputError(f"status: --watch must be in [0.1, 3600] seconds, got {args.watch!r}")
    c = _client(args.address)
    if args.watch and not args.json and not args.job_id:
        from lyra_ray.cli.watch import watch

        return watch(c.overview, args.watch)
    while True:
        if args.job_id:
            row = c.status(args.job_id)
            if args.json:
                print(json.dumps(job_row(row), indent=2))
            else:
                _print_table([row], args.wide)
                _print_pairs([row])
        else:
            view = c.overview()
            if args.json:
                print(json.dumps(status_json(view), indent=2))
            else:
                _print_servers(view)
                _print_table(view["jobs"], args.wide)
                _print_pairs(view["jobs"])
                _print_ignored(view)
                states: dict[str, int] = {}
                for j in view["jobs"]:
                    states[j["status"]] = states.get(j["status"], 0) + 1
                summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                print(f"{len(view['jobs'])} job(s): {summary or 'none yet'}")
        if not args.watch:
            return 0
        time.sleep(args.watch)


def _cancel(args: argparse.Namespace) -> int:
    from lyra_ray.sdk import LyraError

    c = _client(args.address)
    try:
        c.cancel(args.job_id)
    except LyraError as e:
        raise InputError(str(e)) from None
    print(f"cancelled {args.job_id}")
    return 0


def _logs(args: argparse.Namespace) -> int:
    from lyra_ray.runtime.logs import run_log

    c = _client(args.address)
    st = c.status(args.job_id)
    print(json.dumps(st, indent=2))
    for when, jid, gen, a in c.call("launches"):
        if jid == args.job_id:
            stamp = time.strftime("%H:%M:%S", time.localtime(when))
            print(f"{stamp} run g{gen}: {_fmt_assign(a)} on {[n for n, _ in a['nodes']]}")
    print(run_log(args.job_id, int(st.get("generation") or 0), args.tail))
    return 0


def _up(args: argparse.Namespace) -> int:
    from lyra_ray.runtime.local import up

    if not args.local and not args.config:
        raise InputError("up: give --local (fake-GPU nodes on this host) or --config cluster.yaml")
    overrides: dict[str, Any] = {}
    if args.policy:
        overrides["policy"] = args.policy
    if args.round_seconds:
        overrides["round_s"] = args.round_seconds
    if args.throughputs:
        overrides["throughputs"] = args.throughputs
    if args.inference and not args.local:
        raise InputError("up: --inference needs --local")
    info = up(
        args.nodes if args.local else None,
        args.config,
        overrides,
        args.dir,
        args.inference,
        prometheus=args.prometheus,
    )
    print("# run these lines in your shell, then `lyra submit FILE`, `lyra status`:")
    print(f"export RAY_ADDRESS={info['address']}")
    if info.get("auth_mode"):
        print(f"export RAY_AUTH_MODE={info['auth_mode']}")
    if info.get("token_file"):
        print(f"export LYRA_TOKEN_FILE={info['token_file']}")
        print(
            f"lyra identities are on: {info.get('admin', 'admin')!r} is an admin; the token "
            f"in {info['token_file']} (mode 0600) is theirs; `lyra user add NAME` adds users"
        )
    if info.get("dashboard"):
        print(f"dashboard: {info['dashboard']}")
    if info.get("auth_mode") == "token" and info.get("dashboard"):
        print(
            "  it asks for a token: paste what "
            f"`{Path(sys.executable).with_name('ray')} get-auth-token` prints"
        )
    if info.get("prometheus"):
        print(f"prometheus: {info['prometheus']} (scrapes every node; lyra_* metrics)")
    nodes = len(info.get("pids", [])) - 1 - (1 if info.get("prometheus") else 0)
    policy = (info.get("config") or {}).get("policy", "?")
    what = f"{nodes} GPU node(s) and " if args.local else ""
    print(
        f"cluster up at {info['address']}: {what}the scheduler (policy {policy}); "
        "`lyra down` stops it"
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    from lyra_ray.runtime.local import down

    stopped = down(args.dir)
    if stopped:
        print(f"cluster down: stopped the {stopped} process group(s) `lyra up` started")
    else:
        print("nothing to stop: no cluster started by `lyra up` is recorded here")
    return 0
