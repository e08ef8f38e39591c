"""``lyra serve deploy|list|remove|load``: inference services on the inference pool.

A service is the user's own Ray Serve application (or lyra's built-in MoE service),
deployed by the scheduler, which then owns its replicas: it lends the servers the
service does not need to training and reclaims them when its load returns.
``load`` drives real HTTP requests at a service along a compressed day (or a constant
rate, or a spike) and reports latency and failures, so a loan-and-reclaim cycle can be
watched under traffic.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lyra_ray.client.quiet import data_stdout
from lyra_ray.model.errors import InputError


def register(sub: Any) -> None:
    grp = sub.add_parser("serve", help="inference services lyra owns (deploy, list, load)")
    cmds = grp.add_subparsers(dest="serve_command", metavar="SUBCOMMAND", required=True)

    p = cmds.add_parser(
        "deploy", help="deploy your Serve app (a service file, a Serve config, or flags)"
    )
    p.add_argument(
        "file",
        nargs="?",
        help="a service's fields, or a Serve config (applications: [...], a lyra: block each)",
    )
    p.add_argument("--name", help="service name (when no file is given)")
    p.add_argument("--import-path", help="your application: module:attr (when no file)")
    p.add_argument("--working-dir", help="folder shipped as the app's runtime_env working_dir")
    p.add_argument("--route", help="public HTTP route (default /NAME)")
    p.add_argument("--model", default="app", help="app (your import path) | moe (lyra's MoE)")
    p.add_argument("--target-ongoing", type=float, default=None, help="requests per GPU replica")
    p.add_argument("--address", default=None)
    p.set_defaults(func=_deploy)

    p = cmds.add_parser("list", help="services with their replicas and URL")
    p.add_argument("--address", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_list)

    p = cmds.add_parser("remove", help="delete a service and its replicas")
    p.add_argument("service")
    p.add_argument("--address", default=None)
    p.set_defaults(func=_remove)

    p = cmds.add_parser("load", help="drive HTTP requests at a service; report p50/p99")
    p.add_argument("service")
    p.add_argument("--pattern", choices=("diurnal", "constant", "spike"), default="diurnal")
    p.add_argument("--period-s", type=float, default=600.0, help="one compressed day")
    p.add_argument("--peak-rps", type=float, required=True)
    p.add_argument("--trough-fraction", type=float, default=0.2)
    p.add_argument("--duration-s", type=float, required=True)
    p.add_argument("--spike-at-s", type=float, default=0.0)
    p.add_argument("--spike-len-s", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=30.0, help="per request")
    p.add_argument("--json", default=None, help="also write the report here")
    p.add_argument("--address", default=None)
    p.set_defaults(func=_load)


def _client(address: str | None) -> Any:
    from lyra_ray.cli.live import _client as live_client

    return live_client(address)


def _read_spec(args: argparse.Namespace) -> tuple[Any, Path]:
    """What to deploy and the folder its local paths are relative to."""
    from lyra_ray.client.service_files import read_service_file

    if args.file:
        return read_service_file(args.file), Path(args.file).parent
    if not args.name:
        raise InputError("serve deploy: give a FILE or --name")
    raw: dict[str, Any] = {"name": args.name, "model": args.model}
    if args.import_path is not None:
        raw["import_path"] = args.import_path
    if args.working_dir is not None:
        raw["runtime_env"] = {"working_dir": args.working_dir}
    if args.route is not None:
        raw["route"] = args.route
    if args.target_ongoing is not None:
        raw["target_ongoing_per_replica"] = args.target_ongoing
    return raw, Path(".")


def _deploy(args: argparse.Namespace) -> int:
    from lyra_ray.client.service_files import localized, services_of

    raw, base = _read_spec(args)
    # every field and local path checked before the cluster is reached
    services = localized(services_of(raw), base)
    client = _client(args.address)
    urls = client.deploy_services(services)
    for note in client.deploy_notes:
        print(note)
    for name, url in urls.items():
        print(f"service {name} deployed: {url}")
    return 0


def _list(args: argparse.Namespace) -> int:
    out = data_stdout() if args.json else sys.stdout  # Ray's own lines go to stderr
    serving = _client(args.address).overview()["serving"]
    if args.json:
        print(json.dumps(serving["services"], indent=2), file=out, flush=True)
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"lyra services (demand: {serving['demand_servers']} servers)")
    for col in ("service", "app", "replicas", "ready", "servers", "url"):
        t.add_column(col)
    for s in serving["services"]:
        t.add_row(
            s["name"],
            s.get("import_path") or s["model"],
            str(s["replicas"]),
            str(s["ready"]),
            str(s["demand_servers"]),
            s["url"],
        )
    console = Console()
    console.print(t)
    for s in serving["services"]:
        plan = s.get("plan") or {}
        if plan.get("counts"):
            console.print(_plan_line(s["name"], plan))
    return 0


def _plan_line(name: str, plan: dict[str, Any]) -> str:
    """One line per MoE service: the replica budget and each layer's replicas per expert."""
    layers = "; ".join(
        f"layer {i}: " + " ".join(str(c) for c in counts) for i, counts in enumerate(plan["counts"])
    )
    return (
        f"{name}: {plan['devices']} GPUs x {plan['slots']} slots = "
        f"{plan['budget_per_layer']} expert replicas per layer ({layers})"
    )


def _remove(args: argparse.Namespace) -> int:
    from lyra_ray.sdk import LyraError

    try:
        _client(args.address).remove_service(args.service)
    except LyraError as e:
        raise InputError(str(e)) from None
    print(f"service {args.service} removed")
    return 0


def _load(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from lyra_ray.serving.load import LoadProgress, run_load
    from lyra_ray.serving.load_pattern import LoadPattern

    try:
        pattern = LoadPattern(
            kind=args.pattern,
            peak_rps=args.peak_rps,
            duration_s=args.duration_s,
            period_s=args.period_s,
            trough_fraction=args.trough_fraction,
            spike_at_s=args.spike_at_s,
            spike_len_s=args.spike_len_s,
        )
    except ValueError as e:
        raise InputError(f"serve load: {e}") from None
    if not args.timeout_s > 0:
        raise InputError("serve load: --timeout-s must be > 0")
    from lyra_ray.sdk import SpecError

    try:
        url = _client(args.address).service_url(args.service)
    except SpecError as e:
        raise InputError(str(e)) from None
    with Progress(
        TextColumn(f"load {args.service}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("load", total=args.duration_s, info="")

        def progress(p: LoadProgress) -> None:
            bar.update(task, completed=min(p.elapsed_s, args.duration_s), info=_info(p))

        report = run_load(
            url, pattern, seed=args.seed, timeout_s=args.timeout_s, on_progress=progress
        )
    out = report.to_dict()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    p50 = "-" if report.p50_ms is None else f"{report.p50_ms:.0f} ms"
    p99 = "-" if report.p99_ms is None else f"{report.p99_ms:.0f} ms"
    print(
        f"{report.count} requests to {args.service} in {report.duration_s:.0f} s: "
        f"p50 {p50}, p99 {p99}, {report.failed} failed"
        + (f" {dict(report.failures_by_reason)}" if report.failed else "")
    )
    return 0 if report.failed == 0 else 1


def _info(p: Any) -> str:
    return f"{p.sent} sent, {p.failed} failed"


if __name__ == "__main__":
    sys.exit(1)
