"""Where ``lyra up`` keeps what it started (``LYRA_HOME``), and what a client reads there.

Apart from :mod:`lyra_ray.runtime.local` so that the SDK can read the recorded auth mode
without importing the code that starts clusters and the scheduler.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


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
