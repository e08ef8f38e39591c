"""What each service's ingress was told: the servers it sends new requests to.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which decides the servers
(those serving whose copy runs). Its own state because the ingresses are Serve replicas
that can be restarted behind the scheduler's back (a crash, a redeploy) and then know
none: this remembers what was told, notices when an ingress reports other servers, and
tells it again at the next poll. Every call to an ingress goes through here, with one
timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ray import serve

from lyra_ray.serving import apps

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 30.0
Backends = dict[str, list[Any]]
"""Per server: its backend application's name and its GPU replicas."""


def ingress(name: str) -> Any:
    return serve.get_app_handle(apps.ingress_app_name(name))


def call(name: str, method: str, *args: Any) -> Any:
    """Ask ``name``'s ingress, waiting at most ``CALL_TIMEOUT_S``."""
    return getattr(ingress(name), method).remote(*args).result(timeout_s=CALL_TIMEOUT_S)


class IngressRoutes:
    def __init__(self) -> None:
        self.told: dict[str, set[str]] = {}
        """Per service: the servers its ingress was last told."""
        self.retry = False
        """An ingress could not be told its servers (still starting), or reported other
        servers than it was told: tell every ingress again at the next poll."""

    def tell(self, targets: Mapping[str, Backends]) -> None:
        """Tell each service's ingress its servers; stops at the first that cannot be
        told (it may still be starting) and retries all at the next poll."""
        for name, backends in targets.items():
            try:
                call(name, "set_backends", backends)
            except Exception:
                log.info("ingress of %s not ready yet", name, exc_info=True)
                self.retry = True
                return
            self.told[name] = set(backends)
        self.retry = False

    def stale(self, targets: Mapping[str, Backends]) -> bool:
        return self.retry or any(set(b) != self.told.get(n) for n, b in targets.items())

    def inflight_on(self, name: str, node: str) -> int:
        return int(call(name, "inflight_on", node))

    def lost(self, name: str, node: str) -> None:
        """``node`` is gone: the ingress ends the requests still on it (a user's app only:
        the MoE ingress's expert calls time out on their own); not waited for. An ingress
        that cannot be reached (being restarted) holds nothing to end."""
        try:
            ingress(name).lost.remote(node)
        except Exception:
            log.info("ingress of %s not told of lost server %s", name, node[:12], exc_info=True)

    def forget(self, name: str, node: str) -> None:
        """The ingress drops ``node``'s counters (it was lent); not waited for."""
        ingress(name).forget.remote(node)

    def stats(self, name: str, expected: Callable[[], set[str]]) -> Mapping[str, Any] | None:
        """The ingress's counters, None while it still starts. One that routes to other
        servers than ``expected()`` (Serve restarted it after a crash: it knows none) is
        told them again at the next poll."""
        try:
            got = dict(call(name, "stats"))
        except Exception:
            return None
        servers = expected()
        if set(got.get("routing", servers)) != servers:
            self.retry = True
        return got

    def plan(self, name: str) -> dict[str, Any]:
        """A MoE service's expert plan, as its ingress holds it ({} while it starts)."""
        try:
            return dict(call(name, "plan"))
        except Exception:
            return {}
