"""A Redis server of our own for Ray's GCS fault tolerance, started and stopped by PID.

Ray keeps its cluster metadata (nodes, actors, placement groups, jobs, the internal KV
that Serve and the autoscaler write) in the GCS, in memory unless ``RAY_REDIS_ADDRESS``
names a Redis: then a GCS that dies and starts again reads it back, and the worker nodes,
their actors and the detached actors come back with it. KubeRay's documented way to make
the head recoverable is this one (an external Redis), so lyra's is too; Ray's RocksDB
store (``RAY_gcs_storage=rocksdb``) needs no Redis but keeps the data on the head's own
disk, which a lost head takes with it.

The server is Debian's ``redis-server`` (installed by ``scripts/ensure_deb.sh``, as
``make test`` does), on a port of its own (never 6379: another Redis may hold it), with
a password, its append-only file in a directory we own; it runs in its own session and
is stopped by its PID only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lyra_ray.ops.ports import free_port

INSTALL_HINT = "needs Debian's redis-server: run `scripts/ensure_deb.sh redis-server redis`"


def redis_binary() -> str | None:
    return shutil.which("redis-server")


@dataclass
class RedisServer:
    pid: int
    port: int
    password: str
    dir: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ray_env(self, namespace: str) -> dict[str, str]:
        """What a head's ``ray start`` needs in its environment to keep its GCS in this
        Redis: the address and a namespace of its own (several clusters may share a
        Redis). The password is a flag (:meth:`ray_start_args`): Ray 2.60's ``ray start``
        does not read ``RAY_REDIS_PASSWORD`` (only Ray's client server does; a head given
        it alone failed with "Failed to connect to Redis"), as KubeRay passes it too."""
        return {
            "RAY_REDIS_ADDRESS": self.address,
            "RAY_REDIS_PASSWORD": self.password,
            "RAY_external_storage_namespace": namespace,
        }

    def ray_start_args(self) -> list[str]:
        return [f"--redis-password={self.password}"]


def _ping(port: int, password: str) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            data = b""
            while data.count(b"\r\n") < 2:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
            return b"+PONG" in data
    except OSError:
        return False


def start_redis(
    directory: str | Path, port: int | None = None, timeout_s: float = 30.0
) -> RedisServer:
    """Start ``redis-server`` in ``directory`` (its log and append-only file), wait for it."""
    binary = redis_binary()
    if binary is None:
        raise RuntimeError(f"redis-server not found: {INSTALL_HINT}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    password = secrets.token_hex(16)
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d)]
    args += ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
    args += ["--requirepass", password, "--daemonize", "no", "--logfile", str(d / "redis.log")]
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    server = RedisServer(proc.pid, port, password, str(d))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _ping(port, password):
            return server
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited ({proc.returncode}); see {d / 'redis.log'}")
        time.sleep(0.1)
    stop_redis(server)
    raise RuntimeError(f"redis-server did not answer on port {port} in {timeout_s:.0f} s")


def stop_redis(server: RedisServer, grace_s: float = 5.0) -> None:
    """SIGTERM the server's PID, SIGKILL it after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _alive(server.pid):
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGKILL)
    _alive(server.pid)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
