"""``lyra fake-cluster up|worker|kill-node|kill-head|restart-head|down``: cluster.yaml
played on this host (:mod:`lyra_ray.ops.host_cluster`).

``up --autoscaler`` starts Ray's real autoscaler on its fake multi-node provider from
the config derived from the file (docs/autoscaling.md); ``up --redis`` keeps the GCS in
a Redis of its own so that ``kill-head`` and ``restart-head`` show the head coming back
(docs/reliability.md), with workers from ``worker TYPE``. Everything it starts is
recorded in ``--dir`` and stopped by ``down``, by PID.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fake-cluster",
        help="play cluster.yaml on this host (Ray's fake autoscaler, a head to kill)",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    up = verbs.add_parser("up", help="start the head from the file's head commands")
    up.add_argument("--config", required=True, help="the cluster.yaml")
    up.add_argument("--dir", required=True, help="where its processes, state and logs are kept")
    how = up.add_mutually_exclusive_group()
    how.add_argument("--autoscaler", action="store_true", help="workers from Ray's autoscaler")
    how.add_argument("--redis", action="store_true", help="GCS in a Redis: a head that comes back")
    up.add_argument("--types", default=None, help="keep only these node types (comma-separated)")
    up.add_argument("--max-gpus-per-node", type=int, default=None, help="cap each node's GPUs")
    up.add_argument("--idle-timeout-minutes", type=float, default=None)
    up.set_defaults(func=_up)
    for verb, help_ in (
        ("worker", "start a worker of TYPE with the file's worker commands"),
        ("kill-node", "SIGKILL a worker node's raylet and everything under it"),
    ):
        q = verbs.add_parser(verb, help=help_)
        q.add_argument("target", metavar="TYPE" if verb == "worker" else "NODE_ID")
        q.add_argument("--dir", required=True)
        q.set_defaults(func=_on_cluster)
    for verb, help_ in (
        ("kill-head", "SIGKILL the head's GCS and raylet, then the rest of the head"),
        ("restart-head", "run the head's commands again (same Redis, same state path)"),
        ("down", "stop everything `up` started, by PID (never `ray stop`)"),
    ):
        q = verbs.add_parser(verb, help=help_)
        q.add_argument("--dir", required=True)
        q.set_defaults(func=_on_cluster)


def _up(args: argparse.Namespace) -> int:
    from lyra_ray.ops.autoscaling_config import HostFit
    from lyra_ray.ops.host_cluster import start_host_cluster

    if (Path(args.dir) / "host.json").exists():
        raise InputError(f"--dir: {args.dir} holds a running fake cluster; `down` it first")
    g = args.max_gpus_per_node
    if g is not None and not 1 <= g <= 64:
        raise InputError(f"--max-gpus-per-node: 1 to 64, got {g}")
    idle = args.idle_timeout_minutes
    if idle is not None and not (math.isfinite(idle) and 0 < idle <= 1440):
        raise InputError(f"--idle-timeout-minutes: in (0, 1440], got {idle}")
    types = tuple(t for t in (args.types or "").split(",") if t) or None
    fit = HostFit(max_gpus_per_node=g, node_types=types, idle_timeout_minutes=idle)
    hc = start_host_cluster(
        args.config, args.dir, fit, autoscaler=args.autoscaler, redis=args.redis
    )
    token = hc.token_file()
    print(f"export RAY_ADDRESS={hc.address}")
    print(f"export RAY_AUTH_MODE={hc.auth_mode}")
    if token is not None:
        print(f"export LYRA_TOKEN_FILE={token}")
    print(f"dashboard: {hc.dashboard}")
    print(
        f"head up in {hc.heads[-1].started_s} s; `lyra fake-cluster down --dir {args.dir}` stops it"
    )
    return 0


def _on_cluster(args: argparse.Namespace) -> int:
    from lyra_ray.ops.host_cluster import HostCluster

    if not (Path(args.dir) / "host.json").exists():
        raise InputError(f"--dir: no fake cluster recorded in {args.dir}")
    hc = HostCluster.load(args.dir)
    if args.verb == "worker":
        print(f"worker of {args.target} started (process group {hc.start_worker(args.target)})")
    elif args.verb == "kill-node":
        print(f"killed {len(hc.kill_node(args.target))} process(es) of node {args.target}")
    elif args.verb == "kill-head":
        print(json.dumps({"killed": hc.kill_head()}))
    elif args.verb == "restart-head":
        inc = hc.start_head()
        print(f"head incarnation {inc.n} up: {inc.commands_s} s per command")
    else:
        hc.down()
        (Path(args.dir) / "host.json").unlink()
        print("fake cluster down")
    return 0
