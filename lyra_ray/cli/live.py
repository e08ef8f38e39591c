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

from lyra_ray.cli.status_view import (
    _fmt_assign,
    _print_ignored,
    _print_pairs,
    _print_servers,
    _print_table,
    absent_gpu_types,
    job_row,
    status_json,
)
from lyra_ray.cli.team_view import print_teams
from lyra_ray.client.quiet import data_stdout
from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import GRAMMAR


def register(sub: Any) -> None:
    p = sub.add_parser("up", help="start a local multi-node Ray cluster + the scheduler")
    p.add_argument("--local", action="store_true", help="fake-GPU nodes on this host")
    p.add_argument(
        "--nodes",
        default="v100=2x4,p100=2x4,k80=2x4",
        help=f"the training pool: {GRAMMAR} (one-GPU nodes), comma-separated",
    )
    p.add_argument("--inference", default=None, help=f"the inference pool (e.g. t4=2x2): {GRAMMAR}")
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
        "--fresh",
        action="store_true",
        help="start with no jobs: move an earlier cluster's state and checkpoints aside "
        "(<dir>.previous-TIME; nothing is deleted). Without it, lyra resumes them",
    )
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
    p.add_argument("--team", default=None, help="run under TEAM (one you are in; default yours)")
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
        ids = c.submit_entries(entries, extra, base=Path(args.file).parent, team=args.team)
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


def _status(args: argparse.Namespace) -> int:
    import math

    if not (args.watch == 0 or (math.isfinite(args.watch) and 0.1 <= args.watch <= 3600)):
        raise InputError(f"status: --watch must be in [0.1, 3600] seconds, got {args.watch!r}")
    out = data_stdout() if args.json else sys.stdout  # Ray's own lines go to stderr
    c = _client(args.address)
    if args.watch and not args.json and not args.job_id:
        from lyra_ray.cli.watch import watch

        return watch(c.overview, args.watch)
    while True:
        if args.job_id:
            row = c.status(args.job_id)
            if args.json:
                print(json.dumps(job_row(row), indent=2), file=out, flush=True)
            else:
                _print_table([row], args.wide)
                _print_pairs([row])
        else:
            view = c.overview()
            if args.json:
                print(json.dumps(status_json(view), indent=2), file=out, flush=True)
            else:
                _print_servers(view)
                print_teams(view.get("teams", []), view.get("team_settings"))
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
    from lyra_ray.client.logs import run_log

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
    from lyra_ray.ops.local import up

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
        fresh=args.fresh,
    )
    if info.get("set_aside"):
        print(f"--fresh: the earlier state was moved aside to {', '.join(info['set_aside'])}")
    if info.get("resumed"):
        print(info["resumed"])
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
    if info.get("page"):
        print(f"page: {info['page']}  (`lyra page` prints your login link)")
    nodes = len(info.get("pids", [])) - 1 - (1 if info.get("prometheus") else 0)
    policy = (info.get("config") or {}).get("policy", "?")
    what = f"{nodes} GPU node(s) and " if args.local else ""
    print(
        f"cluster up at {info['address']}: {what}the scheduler (policy {policy}); "
        "`lyra down` stops it"
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    from lyra_ray.ops.local import down

    stopped = down(args.dir)
    if stopped:
        print(f"cluster down: stopped the {stopped} process group(s) `lyra up` started")
    else:
        print("nothing to stop: no cluster started by `lyra up` is recorded here")
    return 0
