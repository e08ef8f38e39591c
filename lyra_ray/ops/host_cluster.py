"""A cluster.yaml played on this host: its head started with its own start commands,
workers started either by Ray's real autoscaler (the fake multi-node provider) or with
the file's worker start commands, and, with a Redis, a head that can die and come back.

``ray up`` starts the head by running ``head_start_ray_commands`` on it (with the head
type's resources in ``RAY_OVERRIDE_RESOURCES``) and each worker by running
``worker_start_ray_commands``; the autoscaler then adds and removes workers. Here the
same command lines run as processes on this machine, each in a session of its own (its
process group is what :meth:`HostCluster.down` ends, never ``ray stop``), changed only
where one host demands it (:mod:`lyra_ray.ops.start_commands`: free ports, the head's
resources as flags, the fake provider's config derived from the file by
:mod:`lyra_ray.ops.autoscaling_config`; anything but ``ray start`` and ``lyra up`` is
refused).

Each start of the head is an *incarnation* with its own temp dir and ``LYRA_HOME``, as a
new head machine would have its own disk: only what lives outside the head (the Redis,
the state path of the ``lyra:`` section, the checkpoints) carries over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from lyra_ray.client.quiet import node_env_vars
from lyra_ray.model.errors import InputError
from lyra_ray.ops.autoscaling_config import (
    HostFit,
    fake_provider_config,
    head_type,
    localize,
)
from lyra_ray.ops.cluster_yaml import load_cluster_yaml
from lyra_ray.ops.node_start import start_retried
from lyra_ray.ops.ports import free_port
from lyra_ray.ops.process_groups import descendants, end_groups, members
from lyra_ray.ops.redis import RedisServer, start_redis, stop_redis
from lyra_ray.ops.start_commands import bin_path, head_commands, worker_commands

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
RECONNECT_S = 120
"""``RAY_gcs_rpc_server_reconnect_timeout_s`` for every node: how long a raylet waits for
a GCS that went away before it exits. Ray's default is 60 s; a head restart on this host
(a new ``ray start``, ~10-20 s on two loaded cores) fits either, this leaves room."""


@dataclass
class Incarnation:
    """One start of the head: its process group, temp dir and home, and timings."""

    n: int
    pgid: int = 0
    tmp: str = ""
    home: str = ""
    started_s: float = 0.0
    """Seconds the head's commands took (``ray start`` returned, ``lyra up`` done)."""
    commands_s: list[float] = field(default_factory=list)
    """Seconds each command took, in order (``ray start``, then ``lyra up``: it returns
    once the scheduler answers)."""


@dataclass
class HostCluster:
    workdir: str
    config: str
    """The file as this host plays it (written into ``workdir``)."""
    port: int
    dashboard_port: int
    autoscaler: bool
    namespace: str
    auth_mode: str
    object_store: int
    redis: dict[str, Any] | None = None
    heads: list[Incarnation] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    serve_proxy_port: int = field(default_factory=free_port)
    workers_tmp: str | None = None
    """The worker nodes' temp dir (one host: they share it, as ``lyra up --local``'s do)."""

    # ------------------------------------------------------------------ state on disk

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def doc(self) -> dict[str, Any]:
        return load_cluster_yaml(self.config)

    def save(self) -> None:
        data = asdict(self)
        (Path(self.workdir) / "host.json").write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, workdir: str | Path) -> HostCluster:
        raw = json.loads((Path(workdir) / "host.json").read_text())
        raw["heads"] = [Incarnation(**h) for h in raw["heads"]]
        return cls(**raw)

    def redis_server(self) -> RedisServer | None:
        return None if self.redis is None else RedisServer(**self.redis)

    def token_file(self) -> Path | None:
        """The admin token the first ``lyra up`` wrote (None while lyra has no users)."""
        for h in self.heads:
            p = Path(h.home) / "token"
            if p.exists():
                return p
        return None

    # ------------------------------------------------------------------ environment

    def _env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
        }
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        env["RAY_AUTH_MODE"] = self.auth_mode
        env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        env.update(node_env_vars(env))
        env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "2"
        env["RAY_gcs_rpc_server_reconnect_timeout_s"] = str(RECONNECT_S)
        env["RAY_SERVE_WORKER_PROXY_HTTP_PORT"] = str(self.serve_proxy_port)
        for k in ("RAY_OVERRIDE_RESOURCES", "RAY_OVERRIDE_LABELS", "RAY_FAKE_CLUSTER"):
            env.pop(k, None)
        return env

    # ------------------------------------------------------------------ the head

    def _head_commands(self, fake_config: str | None) -> list[list[str]]:
        server = self.redis_server()
        return head_commands(
            self.doc,
            self.config,
            port=self.port,
            dashboard_port=self.dashboard_port,
            object_store=self.object_store,
            fake_config=fake_config,
            redis_args=server.ray_start_args() if server is not None else (),
        )

    def start_head(self) -> Incarnation:
        """Run the head's start commands (a new incarnation); returns when they ended."""
        n = len(self.heads) + 1
        inc = Incarnation(n)
        base = Path(self.workdir) / f"head-{n}"
        inc.tmp, inc.home = _short_tmp(f"h{n}-"), str(base / "home")
        Path(inc.home).mkdir(parents=True, exist_ok=True)
        fake = None
        if self.autoscaler:
            fake = str(Path(self.workdir) / "autoscaling.yaml")
            cfg = fake_provider_config(self.doc, self.address, self.object_store)
            Path(fake).write_text(yaml.safe_dump(cfg, sort_keys=False))
        env = self._env()
        env.update(RAY_TMPDIR=inc.tmp, LYRA_HOME=inc.home, RAY_ADDRESS=self.address)
        if self.autoscaler:
            env.update(RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1")
        server = self.redis_server()
        if server is not None:
            env.update(server.ray_env(self.namespace))

        def started(pgid: int) -> None:  # its GCS, raylet, ... stay in this group after it exits
            inc.pgid = pgid
            self.heads.append(inc)
            self.save()

        def failed(pgid: int) -> None:  # a try ended by start_retried: forgotten
            self.heads = [h for h in self.heads if h is not inc]
            self.save()

        t0 = time.monotonic()
        for argv in self._head_commands(fake):
            t1 = time.monotonic()
            if argv[0] == bin_path("ray"):
                # WHY tried again, as a fixed worker's start is: a restarted head's raylet
                # (the GCS recovering from Redis, two test processes beside it) once ran
                # out of Ray's fixed 30 s to register on a host with no hog (2026-12-02).
                log_path = base / "ray-start.log"
                ok = start_retried(argv, env, log_path, started, failed)
            else:
                log_path = base / "lyra-up.log"
                with open(log_path, "ab") as out:
                    proc = subprocess.Popen(
                        argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    )
                ok = proc.wait(timeout=600) == 0
            if not ok:
                raise RuntimeError(f"{shlex.join(argv)[:200]} failed; see {log_path}")
            inc.commands_s.append(round(time.monotonic() - t1, 2))
        inc.started_s = round(time.monotonic() - t0, 2)
        self.save()
        return inc

    def head_processes(self) -> dict[str, int]:
        """``gcs_server`` and the head's ``raylet``: PID by name (the current incarnation)."""
        out: dict[str, int] = {}
        for pid, args in members(self.heads[-1].pgid):
            exe = Path(args[0]).name if args else ""
            if exe == "gcs_server":
                out["gcs_server"] = pid
            elif exe == "raylet" and "--head" in args:
                out["raylet"] = pid
        return out

    def kill_head(self) -> dict[str, int]:
        """The head dies: its GCS and raylet are SIGKILLed by PID, then every other process
        of its group, as when the head machine itself is lost. Returns the PIDs killed."""
        if self.autoscaler:
            raise RuntimeError(
                "the fake provider's nodes live in the head's process group: a head that "
                "dies takes them with it (no worker would be left to rejoin)"
            )
        head = self.head_processes()
        if set(head) != {"gcs_server", "raylet"}:
            raise RuntimeError(f"the head's GCS and raylet are not both running: {head}")
        for pid in head.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        end_groups([self.heads[-1].pgid], grace_s=0.0)
        return head

    def kill_node(self, node_id: str) -> list[int]:
        """A worker node is taken away: its raylet (started by the fake provider or by
        :meth:`start_worker`) and every process under it (its workers, its agents) are
        SIGKILLed by PID at once, as when the machine is lost. (A raylet killed alone
        leaves its workers running for a while: a Train loop went on for seconds.)"""
        groups = [h.pgid for h in self.heads] + [int(w["pgid"]) for w in self.workers]
        for pgid in groups:
            for pid, args in members(pgid):
                if args and Path(args[0]).name == "raylet" and f"--node_id={node_id}" in args:
                    tree = [pid, *descendants(pid)]
                    for p in tree:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(p, signal.SIGKILL)
                    return tree
        raise RuntimeError(f"no raylet of node {node_id} among this cluster's processes")

    # ------------------------------------------------------------------ fixed workers

    def start_worker(self, node_type: str) -> int:
        """One worker of ``node_type`` with the file's worker start commands (as ``ray
        up`` starts a worker: the type's resources and labels in ``RAY_OVERRIDE_*``)."""
        doc = self.doc
        spec = doc["available_node_types"].get(node_type)
        if spec is None or node_type == head_type(doc):
            raise InputError(f"no worker node type {node_type!r}")
        res = {k: v for k, v in (spec.get("resources") or {}).items() if k != "object_store_memory"}
        env = self._env()
        if self.workers_tmp is None:
            self.workers_tmp = _short_tmp("w-")
        env.update(
            RAY_TMPDIR=self.workers_tmp,
            RAY_OVERRIDE_RESOURCES=json.dumps(res),
            RAY_OVERRIDE_LABELS=json.dumps(dict(spec.get("labels") or {})),
            RAY_HEAD_IP="127.0.0.1",
        )
        n = len(self.workers)
        log_path = Path(self.workdir) / f"worker-{n}-{node_type}.log"

        def started(pgid: int) -> None:
            self.workers.append({"pgid": pgid, "type": node_type, "log": str(log_path)})
            self.save()

        def failed(pgid: int) -> None:
            self.workers = [w for w in self.workers if int(w["pgid"]) != pgid]
            self.save()

        node_tmp = f"{self.workers_tmp}/n{n}"  # short: Ray puts sockets under it
        for argv in worker_commands(doc, self.address, self.object_store, node_tmp):
            if not start_retried(argv, env, log_path, started, failed):
                raise RuntimeError(f"a {node_type} worker failed to start; see {log_path}")
        return int(self.workers[-1]["pgid"])

    # ------------------------------------------------------------------ the end

    def down(self) -> None:
        """End every process group started here (workers first, then each head) and the
        Redis, by PID; never ``ray stop``."""
        end_groups([int(w["pgid"]) for w in reversed(self.workers)], grace_s=10.0)
        end_groups([h.pgid for h in reversed(self.heads)], grace_s=10.0)
        server = self.redis_server()
        if server is not None:
            stop_redis(server)
        for d in [h.tmp for h in self.heads] + [self.workers_tmp]:
            if d and Path(d).name.startswith("lyra-hc-"):
                shutil.rmtree(d, ignore_errors=True)


def _short_tmp(prefix: str) -> str:
    """A temp dir for a node's ``RAY_TMPDIR``: short, because Ray puts Unix sockets under
    it and a socket's path may not exceed 107 bytes (a pytest tmp_path does)."""
    return tempfile.mkdtemp(prefix=f"lyra-hc-{prefix}", dir="/tmp")


def start_host_cluster(
    cluster_yaml: str | Path,
    workdir: str | Path,
    fit: HostFit,
    *,
    autoscaler: bool,
    redis: bool = False,
    auth_mode: str | None = None,
) -> HostCluster:
    """Play ``cluster_yaml`` here: localize it into ``workdir``, start a Redis (``redis``),
    run the head's commands. Workers come from the autoscaler (``autoscaler``) or from
    :meth:`HostCluster.start_worker`. On failure everything started is ended."""
    from lyra_ray.ops.local import auth_mode as default_auth_mode

    if autoscaler and redis:
        raise InputError("the fake provider's nodes cannot outlive its head: no redis with it")
    w = Path(workdir).resolve()
    w.mkdir(parents=True, exist_ok=True)
    here = {  # outside every head incarnation: what a restarted head finds again
        "state_dir": str(w / "state"),
        "storage_path": str(w / "checkpoints"),
        "serve_port": free_port(),  # never the file's (or Serve's default) 8000
    }
    fit = replace(fit, lyra={**here, **dict(fit.lyra)})
    doc = localize(load_cluster_yaml(cluster_yaml), fit)
    config = w / "cluster.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    mode = auth_mode or os.environ.get("RAY_AUTH_MODE") or default_auth_mode()
    hc = HostCluster(
        workdir=str(w),
        config=str(config),
        port=free_port(),
        dashboard_port=free_port(),
        autoscaler=autoscaler,
        namespace=f"lyra-{w.name}",
        auth_mode=mode,
        object_store=fit.object_store_bytes,
    )
    hc.save()
    try:
        if redis:
            hc.redis = asdict(start_redis(w / "redis"))
            hc.save()
        hc.start_head()
    except BaseException:
        hc.down()
        raise
    return hc


def wait_nodes(
    address: str, n: int, timeout_s: float, env: Mapping[str, str] | None = None
) -> float:
    """Seconds until ``n`` nodes are alive (a client of its own, in a subprocess, so this
    process never holds a Ray connection to a cluster that may lose its head)."""
    code = (
        "import ray, sys, time\n"
        f"ray.init(address={address!r}, log_to_driver=False, logging_level='ERROR')\n"
        "t = time.monotonic()\n"
        f"while sum(x['Alive'] for x in ray.nodes()) < {n}:\n"
        f"    if time.monotonic() - t > {timeout_s}: sys.exit(1)\n"
        "    time.sleep(0.5)\n"
    )
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(env or os.environ),
        capture_output=True,
        timeout=timeout_s + 60,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{n} nodes not alive in {timeout_s:.0f} s: {out.stderr[-500:]!r}")
    return time.monotonic() - t0
