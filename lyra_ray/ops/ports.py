"""Free TCP ports for the processes lyra starts on one host (Serve's proxies, dashboards,
agents, Redis, Prometheus).

WHY not ``bind(0)``: the kernel hands ``bind(0)`` a port from its ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), the very range it draws the local port of
every outgoing connection from, and Ray picks its own component ports the same way. A
port found free there and bound a few seconds later, by Serve's proxy say, was sometimes
already some connection's local port: "Failed to bind to address '127.0.0.1:44793'"
(a CI run of the suite). Between Ray's worker-port range (10002-19999 by default) and
the ephemeral range nothing is handed out by the kernel, so lyra draws from there at
random, checks the port binds, and claims it in a file under the temp dir so that two
processes on the host (pytest-xdist workers, two ``lyra up``) are not given the same one
before either has bound it.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import tempfile
import time
from pathlib import Path

RAY_WORKER_PORT_MAX = 19_999
"""Ray's default ``--max-worker-port``: its workers bind the ports up to here."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
CLAIM_TTL_S = 600.0
"""How long a claim holds: long enough for the slowest start to bind its port."""
MIN_POOL = 1_000
"""Fewer ports than this between the two ranges (a host with a widened ephemeral range):
fall back to ``bind(0)``."""


def pool(ephemeral: Path = EPHEMERAL_RANGE) -> range | None:
    """The ports lyra draws from, or None where the host leaves too few (or is not
    Linux)."""
    try:
        low = int(ephemeral.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ports = range(RAY_WORKER_PORT_MAX + 1, min(low, 65_536))
    return ports if len(ports) >= MIN_POOL else None


def _binds(port: int) -> bool:
    """Whether nothing listens on the port, on any address (a listener on 127.0.0.1 also
    makes binding 0.0.0.0 fail)."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _claim(port: int, claims: Path) -> bool:
    """Claim the port for this process unless another claimed it within the TTL."""
    claims.mkdir(parents=True, exist_ok=True)
    path = claims / str(port)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        try:
            if time.time() - path.stat().st_mtime < CLAIM_TTL_S:
                return False
            os.utime(path)  # stale: ours now (a race here costs at most one bind check)
            return True
        except OSError:
            return False
    os.close(fd)
    return True


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port(ephemeral: Path = EPHEMERAL_RANGE, claims: Path | None = None) -> int:
    """A port nothing listens on, below the ephemeral range, not claimed lately by this
    process or another (the claim file is what keeps this process too from being handed
    one port twice before it binds it)."""
    ports = pool(ephemeral)
    if ports is None:
        return _kernel_port()
    claims = claims or Path(tempfile.gettempdir()) / f"lyra-port-claims-{os.getuid()}"
    for _ in range(200):
        port = random.choice(ports)
        if _binds(port) and _claim(port, claims):
            return port
    raise OSError(errno.EADDRINUSE, f"no free port found in {ports.start}-{ports.stop - 1}")
