"""A cluster.yaml's start commands, as one host plays them.

``ray up`` runs ``head_start_ray_commands`` on the head machine and
``worker_start_ray_commands`` on each worker. :class:`~lyra_ray.ops.host_cluster.HostCluster`
runs the same lines as processes on this machine; this module rewrites each line where
one host demands it and refuses the rest. Apart from the cluster because it is where a
user's file is read, so where its errors are named (the command's list and index), and
it needs no process to test.

- ``ray start``: the ports, the object store and a worker's temp dir are the host's
  (the file's 6379 may be another engineer's Redis), the head's resources go on as flags
  (the fake provider starts its nodes inside the head's autoscaler, which would pass a
  ``RAY_OVERRIDE_RESOURCES`` on to every node), and ``--autoscaling-config`` names the
  fake provider's config, or is dropped when the workers are started by hand.
- ``lyra up --config FILE``: FILE is the file as this host plays it.
- Anything else is refused: this is no shell for arbitrary setup commands.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.ops.autoscaling_config import head_type
from lyra_ray.ops.ports import free_port

HEAD_FLAGS = (
    "--port",
    "--dashboard-port",
    "--dashboard-host",
    "--ray-client-server-port",
    "--dashboard-agent-listen-port",
    "--object-store-memory",
    "--autoscaling-config",
    "--num-cpus",
    "--num-gpus",
    "--resources",
    "--redis-password",
    "--block",
)
"""``ray start`` flags of the head's command this module sets itself."""
WORKER_FLAGS = (
    "--address",
    "--dashboard-agent-listen-port",
    "--object-store-memory",
    "--temp-dir",
    "--block",
)


def bin_path(name: str) -> str:
    """A console script of this environment (``ray``, ``lyra``)."""
    return str(Path(sys.executable).with_name(name))


def strip_flags(argv: list[str], flags: Sequence[str]) -> list[str]:
    """``argv`` without ``flags`` (as ``--f=v`` or ``--f v``; ``--block`` has no value)."""
    out: list[str] = []
    skip = False
    for w in argv:
        if skip:
            skip = False
            continue
        name = w.split("=", 1)[0]
        if name in flags:
            skip = "=" not in w and name != "--block"
            continue
        out.append(w)
    return out


def flag_value(argv: list[str], name: str) -> str | None:
    for i, w in enumerate(argv):
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
        if w == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def head_commands(
    doc: Mapping[str, Any],
    config: str,
    *,
    port: int,
    dashboard_port: int,
    object_store: int,
    fake_config: str | None,
    redis_args: Sequence[str] = (),
) -> list[list[str]]:
    """The head's start commands as argv lists: ``ray start`` on ``port`` with the head
    type's resources (and the fake provider's ``fake_config``, the Redis's
    ``redis_args``), ``lyra up`` with ``config``. InputError names the line."""
    head = doc["available_node_types"][head_type(doc)]
    res = dict(head.get("resources") or {})
    out: list[list[str]] = []
    for i, line in enumerate(doc.get("head_start_ray_commands") or []):
        argv = shlex.split(str(line))
        where = f"head_start_ray_commands[{i}]"
        if argv[:2] == ["ray", "start"]:
            argv = [bin_path("ray"), *strip_flags(argv[1:], HEAD_FLAGS)]
            argv += [
                f"--port={port}",
                f"--dashboard-port={dashboard_port}",
                "--dashboard-host=127.0.0.1",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--object-store-memory={object_store}",
                f"--num-cpus={int(res.pop('CPU', 0))}",
                f"--num-gpus={int(res.pop('GPU', 0))}",
            ]
            for k in ("memory", "object_store_memory"):
                res.pop(k, None)
            if res:
                argv.append(f"--resources={json.dumps(res)}")
            if fake_config is not None:
                argv.append(f"--autoscaling-config={fake_config}")
            argv += redis_args
        elif argv[:2] == ["lyra", "up"]:
            if flag_value(argv, "--config") is None:
                raise InputError(f"{where}: `lyra up` needs --config (the cluster.yaml)")
            argv = [bin_path("lyra"), *strip_flags(argv[1:], ("--config",)), "--config", config]
        else:
            msg = f"{where}: this host runs only `ray start` and `lyra up` commands, got {line!r}"
            raise InputError(msg[:300])
        out.append(argv)
    if not any(a[0] == bin_path("ray") for a in out):
        raise InputError("head_start_ray_commands: no `ray start` to start the head with")
    return out


def worker_commands(
    doc: Mapping[str, Any], address: str, object_store: int, temp_dir: str
) -> list[list[str]]:
    """A worker's start commands as argv lists: ``ray start`` joining ``address``, in a
    ``temp_dir`` of its own, as a host has (with the head's, the nodes of one host share
    a runtime-env directory, and a node that sets a ``working_dir`` up unpacks it over
    the copy another node's processes run in; see ``ops/embedded.py``)."""
    out: list[list[str]] = []
    for i, line in enumerate(doc.get("worker_start_ray_commands") or []):
        argv = shlex.split(str(line))
        if argv[:2] != ["ray", "start"]:
            raise InputError(f"worker_start_ray_commands[{i}]: only `ray start`, got {line!r}")
        out.append(
            [
                bin_path("ray"),
                *strip_flags(argv[1:], WORKER_FLAGS),
                f"--address={address}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--object-store-memory={object_store}",
                f"--temp-dir={temp_dir}",
            ]
        )
    return out
