"""A job's runtime env on the scheduler's side: check what a client uploaded, keep it alive.

WHY: a user's code reaches workers as a content-addressed ``gcs://_ray_pkg_<hash>.zip``
package the client uploaded (:mod:`lyra_ray.client.user_env`).

- :func:`ray_check` (the boundary): Ray's own validation (``RuntimeEnv(**env)``) and
  whether the GCS still holds each package.
- :class:`UriKeeper`: the GCS deletes a package once nothing references it, and between
  two generations of a job (queued, preempted) nothing does; the submitting Ray job may
  have ended long ago. lyra pins each active job's packages with Ray's own temporary
  reference (``pin_runtime_env_uri``, which ``ray job submit`` uses to bridge upload and
  start), renewed while the job is active and left to expire after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import uris

log = logging.getLogger(__name__)

PIN_S = 2 * 3600
"""How long one pin keeps a package; renewed every :data:`RENEW_S` while the job lives."""
RENEW_S = 600.0


def ray_check(env: Mapping[str, Any]) -> None:
    """Ray's own checks of an uploaded env, and that the GCS holds its packages."""
    if not env:
        return
    from ray._private.runtime_env.packaging import package_exists
    from ray.runtime_env import RuntimeEnv

    try:
        RuntimeEnv(**dict(env))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"field 'runtime_env': Ray refuses it: {first}") from None
    for u in uris(env):
        if u.startswith("gcs://") and not package_exists(u):
            raise InputError(
                f"field 'runtime_env': package {u} is not in this cluster's GCS "
                "(uploaded to another cluster, or expired): submit again from its directory"
            )


def missing_packages(env: Mapping[str, Any] | None) -> list[str]:
    """The GCS packages of ``env`` the cluster no longer holds (a run would fail to start)."""
    from ray._private.runtime_env.packaging import package_exists

    return [u for u in uris(env) if u.startswith("gcs://") and not package_exists(u)]


class UriKeeper:
    """Pins the GCS packages of active jobs (see the module docstring)."""

    def __init__(self) -> None:
        self.pinned: dict[str, float] = {}

    def keep(self, envs: Iterable[Mapping[str, Any] | None], now: float | None = None) -> int:
        """Pin each package not pinned in the last :data:`RENEW_S`; returns how many."""
        from ray._private.runtime_env.packaging import pin_runtime_env_uri

        now = time.time() if now is None else now
        wanted = {u for env in envs for u in uris(env) if u.startswith("gcs://")}
        count = 0
        for u in sorted(wanted):
            if now - self.pinned.get(u, -1e18) < RENEW_S:
                continue
            try:
                pin_runtime_env_uri(u, expiration_s=PIN_S)
            except Exception:  # GCS busy: try again at the next renewal
                log.warning("could not pin %s", u, exc_info=True)
                continue
            self.pinned[u] = now
            count += 1
        for u in set(self.pinned) - wanted:
            del self.pinned[u]
        return count
