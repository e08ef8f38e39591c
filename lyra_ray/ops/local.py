"""``lyra up --local`` / ``lyra down``: a lasting multi-node Ray cluster on one host.

Each node is one ``ray start --block`` process in its own session, so ``down`` can end
exactly the process groups that ``up`` started (recorded in ``<dir>/up.json``) and
nothing else — never ``ray stop``, which would end every Ray process on the machine.
Several nodes on one host each need their own dashboard-agent port (else job logs on
those nodes fail) and a small object store (the default takes 30 % of RAM per node).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lyra_ray.client.home import lyra_home
from lyra_ray.client.quiet import init_ray, node_env
from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import parse_pool
from lyra_ray.model.spec import read_text_input, safe_load_yaml
from lyra_ray.ops.cluster_yaml import with_node_types
from lyra_ray.ops.embedded import disconnect
from lyra_ray.ops.ports import free_port
from lyra_ray.ops.process_groups import end_groups

log = logging.getLogger(__name__)

MAX_LOCAL = 64
"""Nodes of a type, and GPUs per node, that ``lyra up --local`` starts on one host."""


def parse_nodes(spec: str, flag: str = "--nodes") -> list[tuple[str, int, int]]:
    """``v100=2x4,p100=2`` -> [(gpu type, nodes, GPUs per node), ...] in the one pool
    grammar (:mod:`lyra_ray.model.pools`; ``TYPE=N`` is N one-GPU nodes), with at most
    :data:`MAX_LOCAL` nodes of a type and GPUs per node: each is a process here."""
    out: list[tuple[str, int, int]] = []
    for item in parse_pool(spec, flag).items:
        sizes = item.node_sizes(1)
        per, nodes = sizes[0], len(sizes)
        if not (nodes <= MAX_LOCAL and per <= MAX_LOCAL):
            raise InputError(
                f"{flag}: {item.gpu_type}: {nodes} nodes of {per} GPUs; a local cluster "
                f"starts at most {MAX_LOCAL} nodes of a type with 1-{MAX_LOCAL} GPUs each"
            )
        out.append((item.gpu_type, nodes, per))
    return out


def lyra_section(config_path: str | None) -> dict[str, Any]:
    """The ``metadata.lyra`` section of a cluster.yaml (or a top-level ``lyra:``)."""
    if not config_path:
        return {}
    # (a bad date, deep nesting or a binary file used to escape as a traceback)
    doc = safe_load_yaml(read_text_input(config_path, "config"), config_path)
    if not isinstance(doc, dict):
        raise InputError(f"{config_path}: expected a mapping (a Ray cluster config)")
    meta = doc.get("metadata")
    section = doc.get("lyra", meta.get("lyra", {}) if isinstance(meta, dict) else {})
    if not isinstance(section, dict):
        raise InputError(f"{config_path}: field 'metadata.lyra': must be a mapping")
    section = with_node_types(section, doc)  # the node types autoscale asks for
    table = section.get("throughputs")
    if isinstance(table, str) and not Path(table).is_absolute():
        # a table named beside the cluster.yaml, as its other files are
        section = {**section, "throughputs": str(Path(config_path).parent / table)}
    return section


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _spawn(args: list[str], logfile: Path, env: dict[str, str]) -> int:
    with open(logfile, "ab") as out:
        proc = subprocess.Popen(
            [_ray_bin(), "start", "--block", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: `down` ends exactly this
        )
    return proc.pid


def up(
    nodes_spec: str | None,
    config_path: str | None,
    overrides: dict[str, Any],
    home: str | None = None,
    inference_spec: str | None = None,
    prometheus: bool = False,
    fresh: bool = False,
) -> dict[str, Any]:
    """Start the nodes (if ``nodes_spec``: training; ``inference_spec``: the inference
    pool, labelled ``pool=inference``), then the scheduler, and with ``prometheus`` a
    Prometheus that scrapes them; returns the addresses.

    A state directory an earlier cluster left (``lyra down`` ends processes only) is
    resumed: every unfinished job and the archive, whatever changed (policy, nodes).
    Only ``fresh`` starts without it, and even then moves it aside rather than delete
    it (:func:`set_aside`). A state that cannot be resumed is refused before any process
    starts, in one line, untouched (:mod:`lyra_ray.runtime.saved_state`)."""
    if prometheus:
        from lyra_ray.ops import prometheus as prom

        if nodes_spec is None:
            raise InputError("--prometheus: only with --local (it scrapes this host's nodes)")
        if prom.prometheus_binary() is None:
            raise InputError(f"--prometheus: {prom.INSTALL_HINT}")
    if inference_spec is not None:
        if nodes_spec is None:
            raise InputError("--inference: only with --local (fake-GPU nodes on this host)")
        parse_nodes(inference_spec, "--inference")
    if nodes_spec is not None:  # refused before any process starts
        parse_nodes(nodes_spec, "--nodes")
    from lyra_ray.runtime.config import SchedulerConfig

    h = lyra_home(home)
    # A --local cluster keeps its scheduler state and checkpoints beside its own processes:
    # `lyra down` then `lyra up` with the same --dir resumes them.
    local = {
        "state_dir": str(h / "state"),
        "storage_path": str(h / "checkpoints"),
        "serve_port": free_port(),
    }
    base = local if nodes_spec is not None else {}
    cfg = SchedulerConfig.from_dict({**base, **lyra_section(config_path), **overrides})
    if (h / "up.json").exists():
        raise InputError(
            f"{h / 'up.json'}: a cluster started by `lyra up` is running; `lyra down` first"
        )
    info: dict[str, Any] = {"pids": []}
    if fresh:
        info["set_aside"] = set_aside(cfg)
    elif nodes_spec is not None and Path(cfg.state_dir).is_dir():
        # (no scheduler writes it: no `lyra up` runs here; on a cluster of its own, the
        # scheduler actor makes the same check on its head node)
        from lyra_ray.runtime.saved_state import describe, inspect_saved

        saved = inspect_saved(cfg.state_dir)  # SavedStateError: an InputError, one line
        if saved is not None:
            info["resumed"] = describe(saved, cfg.policy)
    if nodes_spec is not None:
        # before anything imports Ray (it reads the mode once, at import), and after every
        # refusal above: a refused `up` leaves the caller's environment as it was
        os.environ["RAY_AUTH_MODE"] = auth_mode()
    if prometheus:
        info["prometheus"] = f"http://127.0.0.1:{free_port()}"
    try:
        return _up(h, nodes_spec, cfg, info, inference_spec)
    except BaseException:
        if info["pids"]:
            log.warning("lyra up failed: stopping the %d node(s) it started", len(info["pids"]))
            # disconnect first: a driver left connected to the GCS `down` ends aborts
            # this process 60 s later, before the error below is ever printed
            disconnect()
            down(str(h))
        raise


def set_aside(cfg: Any) -> list[str]:
    """``lyra up --fresh``: move the scheduler state and checkpoints of an earlier cluster
    next to where they were (``<dir>.previous-<UTC time>``, a rename on the same disk), so
    that the new scheduler starts with no job and nothing is deleted; returns where they
    went. WHY not delete: a restart is the common case and losing a queue is not undone;
    the user removes the old directories when they choose."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved = []
    for key in ("state_dir", "storage_path"):
        d = Path(getattr(cfg, key))
        if d.is_dir() and any(d.iterdir()):
            dest = d.with_name(f"{d.name}.previous-{stamp}")
            shutil.move(str(d), str(dest))
            moved.append(str(dest))
    return moved


def auth_mode() -> str:
    """The Ray auth mode for the nodes `up` starts and every client of them.

    Ray 2.60's ``ray start`` turns token auth on by itself when a token exists, but a
    client given an explicit address does not (it only auto-detects for ``auto``), so a
    mismatch would lock our own CLI and SDK out. We pick the mode once — the user's
    ``RAY_AUTH_MODE`` if set, else ``token`` — and hand it to both sides, creating the
    token (``ray get-auth-token --generate``) if none exists yet.
    """
    mode = os.environ.get("RAY_AUTH_MODE", "token").lower()
    if mode == "token" and not _token_available():
        subprocess.run(
            [_ray_bin(), "get-auth-token", "--generate"], check=True, capture_output=True
        )
    return mode


def _token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def _up(
    h: Path, nodes_spec: str | None, cfg: Any, info: dict[str, Any], inference: str | None
) -> dict[str, Any]:
    import ray

    from lyra_ray.runtime.scheduler_start import start_scheduler

    if nodes_spec is not None:
        env = node_env()
        env.setdefault("RAY_TMPDIR", f"/tmp/lyra-{os.getuid()}")
        # On SIGTERM (`lyra down`) a node first drains, for up to 30 s by default, so
        # that a rolling upgrade's proxies can quiesce; `down` ends every node at once,
        # so that wait bought nothing and made `lyra down` take 30 s.
        env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "2")
        info["auth_mode"] = env["RAY_AUTH_MODE"] = os.environ["RAY_AUTH_MODE"]
        if info.get("prometheus"):  # the Ray dashboard's metrics views query it
            env["RAY_PROMETHEUS_HOST"] = info["prometheus"]
        # Job drivers (`ray job submit -- lyra submit ...`) run under these nodes'
        # environment: put this interpreter's scripts (`lyra`, `python`) first on PATH,
        # so they work from a shell that never activated the venv.
        bindir = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join([bindir, *filter(None, [env.get("PATH")])])
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([repo, *filter(None, [env.get("PYTHONPATH")])])
        port, dash = free_port(), int(os.environ.get("LYRA_DASHBOARD_PORT", free_port()))
        address = f"127.0.0.1:{port}"
        # the new cluster's own address, never one an old `lyra up` left exported: Ray's
        # State API prefers it to any address given (see ops/embedded.py: a stopped Train
        # run's GPUs were never freed)
        env.pop("RAY_API_SERVER_ADDRESS", None)
        env["RAY_ADDRESS"] = address
        head = [
            "--head",
            f"--port={port}",
            "--num-cpus=1",
            "--num-gpus=0",
            f"--object-store-memory={150 * 2**20}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            f"--dashboard-agent-listen-port={free_port()}",
            "--labels=pool=head",
        ]
        info["pids"].append(_spawn(head, h / "head.log", env))
        info.update(address=address, dashboard=f"http://127.0.0.1:{dash}")
        _save(h, info)  # so that `down` works even if a later step fails
        _wait_port(port)
        os.environ["RAY_TMPDIR"] = env["RAY_TMPDIR"]
        init_ray(address)
        _wait_nodes(1)
        # One node at a time, each waited for: on a small, busy host a burst of raylets
        # registering with a GCS that is still starting times out ("node timed out
        # during startup"); in sequence each one takes a few seconds.
        expected = 1
        # The worker nodes' Serve proxies get a port of their own, which no client is
        # given: on one host each would otherwise bind the head proxy's port
        # (SO_REUSEPORT), and the kernel hands some new connections to a proxy Serve has
        # just started, before it has routes: 'POST 404' (see ops/embedded.py).
        worker_env = {**env, "RAY_SERVE_WORKER_PROXY_HTTP_PORT": str(free_port())}
        pools = [(nodes_spec, "training")] + ([(inference, "inference")] if inference else [])
        items = [(g, c, n, pool) for spec, pool in pools for g, c, n in parse_nodes(spec)]
        for gpu, count, gpus, pool in items:
            for i in range(count):
                args = [
                    f"--address={address}",
                    "--num-cpus=2",
                    f"--num-gpus={gpus}",
                    f"--resources={json.dumps({f'accelerator_type:{gpu.upper()}': 1})}",
                    f"--labels=gpu-type={gpu},pool={pool}",
                    f"--object-store-memory={100 * 2**20}",
                    f"--dashboard-agent-listen-port={free_port()}",
                    # a temp dir of its own, as a host has: with the head's, every node
                    # shares one runtime-env directory, and a node that sets a
                    # working_dir up unpacks it over the copy another node's processes
                    # run in (see ops/embedded.py). Short: Ray puts sockets under it.
                    # Reused by the next `up` as Ray reuses its own: each session (each
                    # cluster) has a directory of its own inside it.
                    f"--temp-dir={env['RAY_TMPDIR']}/ray-node{expected}",
                ]
                logfile = h / f"{pool}-{gpu}-{i}.log"
                info["pids"].append(_spawn(args, logfile, worker_env))
                expected += 1
                _save(h, info)
                _wait_nodes(expected, pid=info["pids"][-1], logfile=logfile)
                log.info("%s node %s-%d up (%d GPUs)", pool, gpu, i, gpus)
    else:
        init_ray(os.environ.get("RAY_ADDRESS", "auto"))
        info.update(address=ray.get_runtime_context().gcs_address, dashboard=None)
    actor = start_scheduler(cfg)
    _first_admin(actor, h, info)
    info["page"] = _page(cfg, info.get("dashboard"))
    if info.get("prometheus"):
        from lyra_ray.ops import prometheus as prom

        port = int(info["prometheus"].rsplit(":", 1)[1])
        p = prom.start(prom.session_dir(), h / "prometheus", port)
        info["pids"].append(p.pid)
        _save(h, info)
    info["config"] = {k: v for k, v in vars(cfg).items() if k != "throughputs"}
    _save(h, info)
    disconnect()
    return info


ADMIN = "admin"


def _first_admin(actor: Any, h: Path, info: dict[str, Any]) -> None:
    """Turn lyra identities on: create the first admin and keep its token in ``h/token``
    (0600), where this OS user's CLI and SDK find it. A scheduler that already has users
    (`lyra up` without --local on a cluster whose scheduler runs) keeps them and its token."""
    import ray

    from lyra_ray.client.home import token_path, write_token

    try:
        reply = ray.get(actor.user_add.remote(ADMIN, True))
    except ray.exceptions.RayTaskError as e:
        if not isinstance(e.cause, PermissionError):
            raise
        reply = {"ok": False}
    if reply.get("ok"):
        info["token_file"] = str(write_token(str(reply["token"]), str(h)))
    elif token_path(str(h)).exists():
        info["token_file"] = str(token_path(str(h)))
    info["admin"] = ADMIN


def _page(cfg: Any, dashboard: str | None) -> str | None:
    """Deploy the operator's page on the scheduler's Serve proxy; its address. A page
    that fails to start does not fail the cluster: `lyra page` deploys it later."""
    from lyra_ray.page.deploy import deploy_page

    try:
        return deploy_page(cfg.serve_host, cfg.serve_port, dashboard)
    except Exception:
        log.warning("the operator's page did not start; `lyra page` retries", exc_info=True)
        return None


def _save(h: Path, info: dict[str, Any]) -> None:
    (h / "up.json").write_text(json.dumps(info, indent=2))


def _wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"the head node did not open port {port} in {timeout:.0f}s")


def _wait_nodes(
    n: int, timeout: float = 180.0, pid: int | None = None, logfile: Path | None = None
) -> None:
    """Wait until ``n`` nodes are alive; fail at once if the node process ``pid`` exited."""
    import ray

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [x for x in ray.nodes() if x["Alive"]]  # type: ignore[no-untyped-call]
        if len(alive) >= n:
            return
        if pid is not None and _exited(pid):
            raise RuntimeError(f"a node failed to start; see {logfile}")
        time.sleep(1.0)
    raise RuntimeError(f"only some of the {n} nodes came up in {timeout:.0f}s; see {logfile}")


def _exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) != (0, 0)
    except ChildProcessError:  # already reaped: it is gone
        return True


def down(home: str | None = None, timeout: float = 30.0) -> int:
    """End the process groups `up` started (SIGTERM, then SIGKILL); returns how many."""
    h = lyra_home(home)
    f = h / "up.json"
    if not f.exists():
        return 0
    pids = [int(p) for p in json.loads(f.read_text()).get("pids", [])]
    end_groups(reversed(pids), grace_s=timeout)  # workers first, head last
    f.unlink()
    return len(pids)
