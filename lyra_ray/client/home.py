"""Where ``lyra up`` keeps what it started (``LYRA_HOME``), and what a client reads there.

Apart from :mod:`lyra_ray.ops.local` so that the SDK can read the recorded auth mode
without importing the code that starts clusters and the scheduler.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lyra_ray.contract.tokens import TOKEN_ENV, TOKEN_FILE, TOKEN_FILE_ENV


def lyra_home(d: str | None = None) -> Path:
    """``d``, else ``$LYRA_HOME``, else ``~/.lyra``; created if missing."""
    p = Path(d or os.environ.get("LYRA_HOME") or Path.home() / ".lyra")
    p.mkdir(parents=True, exist_ok=True)
    return p


def recorded_auth_mode(home: str | None = None) -> str | None:
    """The auth mode of the cluster `lyra up` started here, if one is running."""
    f = lyra_home(home) / "up.json"
    try:
        mode = json.loads(f.read_text()).get("auth_mode")
    except (OSError, ValueError):
        return None
    return str(mode) if mode else None


def token_path(home: str | None = None) -> Path:
    return lyra_home(home) / TOKEN_FILE


def write_token(token: str, home: str | None = None) -> Path:
    """Write a token readable by this OS user only (created 0600, never widened)."""
    p = token_path(home)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(p, 0o600)
    return p


def resolve_token(environ: dict[str, str] | None = None) -> str | None:
    """The caller's lyra token: ``LYRA_TOKEN``, else the file ``LYRA_TOKEN_FILE`` names,
    else ``$LYRA_HOME/token`` if it exists, else None.

    WHY a file fallback: Ray itself reads ``~/.ray/auth_token`` the same way, and a job
    driver started by ``ray job submit`` on a ``lyra up --local`` cluster runs as the same
    OS user with the same home, so it finds the admin's token without it travelling in
    the job's (dashboard-visible) runtime env. A file another OS user cannot read (0600)
    grants nothing to them."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV, "").strip()
    if token:
        return token
    named = env.get(TOKEN_FILE_ENV, "").strip()
    home = env.get("LYRA_HOME")
    # a file named on purpose is the only one read: never fall back to another identity
    p = Path(named).expanduser() if named else Path(home or Path.home() / ".lyra") / TOKEN_FILE
    try:
        text = p.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None
