"""How many inference servers the services need, sampled from their ingresses.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which keeps the servers and
their loan states; this keeps what the demand side learns: one
:class:`~lyra_ray.serving.demand.DemandEstimator` per service, the pool's level (the
largest of the services'), when it last rose (the start of a reclaim's latency), and
each ingress's latest counters (what the metrics export).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from lyra_ray import model as m
from lyra_ray.serving.demand import DemandConfig, DemandEstimator
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)


class PoolDemand:
    def __init__(self) -> None:
        self.estimators: dict[str, DemandEstimator] = {}
        self.level: int | None = None
        self.rise_at: float | None = None
        """When the level last rose, until the reclaims it asked for are done."""
        self.last_stats: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, Any] = {}
        """Saved estimators not yet restored: :meth:`resize` restores them once it knows
        the servers (see :meth:`load_state`)."""

    def to_state(self) -> dict[str, Any]:
        return {
            "estimators": {k: e.to_state() for k, e in sorted(self.estimators.items())},
            "demand": self.level,
        }

    def load_state(self, saved: Mapping[str, Any]) -> None:
        """The level now; the estimators are rebuilt by the first :meth:`resize` that
        knows a server. WHY not at once: a restarted scheduler loads its state before
        the inventory reports the servers, and an estimator sized to none clamps its
        saved level to one server (then up to ``min_servers``): a service at 3 servers
        came back at 2, and a server was lent under full load, to be reclaimed 45 s
        later (the serving chaos test's scheduler kill)."""
        self.level = saved.get("demand")
        self._pending = dict(saved.get("estimators") or {})

    def resize(
        self,
        services: Mapping[str, ServiceSpec],
        servers: int,
        per_server: Callable[[ServiceSpec], int],
        saved: Mapping[str, Any] | None = None,
        start: Mapping[str, int] | None = None,
    ) -> None:
        """One estimator per service, sized to the current pool (resumed where saved,
        else from the current ones).

        A new service starts at ``start`` servers (those serving when it is deployed),
        within its bounds: nothing is lent or reclaimed on a guess before its load is
        seen, except what its floor of ``min_servers`` requires.
        """
        if saved is None and self._pending:
            if servers <= 0:
                return  # restored once a server is known
            saved, self._pending = self._pending, {}
        if saved is None:
            saved = {k: e.to_state() for k, e in self.estimators.items()}
        servers = max(1, servers)
        out: dict[str, DemandEstimator] = {}
        for name, spec in services.items():
            cfg = DemandConfig(
                target_ongoing_per_replica=spec.target_ongoing_per_replica,
                replicas_per_server=per_server(spec),
                smoothing_s=spec.smoothing_s,
                up_after_s=spec.up_after_s,
                down_after_s=spec.down_after_s,
                min_servers=min(spec.min_servers, servers),
                max_servers=servers,
            )
            st = saved.get(name)
            if st is not None:
                out[name] = DemandEstimator.from_state(cfg, st)
            else:
                first = (start or {}).get(name, cfg.max_servers)
                level = min(cfg.max_servers, max(cfg.min_servers, first))
                out[name] = DemandEstimator(cfg, initial_servers=level)
        self.estimators = out

    def forget(self, name: str) -> None:
        self.estimators.pop(name, None)

    def of(self, name: str) -> int:
        est = self.estimators.get(name)
        return est.level if est is not None else 0

    def sample(self, now: float, stats: Callable[[str], Mapping[str, Any] | None]) -> list[m.Event]:
        """Feed each service's ingress counters (``stats(name)``, None while it starts:
        its level stays) to its estimator; a ServingDemand when the pool's level moved."""
        level = 0
        for name, est in self.estimators.items():
            st = stats(name)
            if st is not None:
                self.last_stats[name] = dict(st)
                est.update(now, float(st["ongoing_avg"]), None)
            level = max(level, est.level)
        if level == self.level:
            return []
        if self.level is not None and level > self.level and self.rise_at is None:
            self.rise_at = now
        needs = ", ".join(
            f"{name} {est.level} ({est.need_servers:.2f})"
            for name, est in sorted(self.estimators.items())
            if est.need_servers is not None
        )
        log.info("serving demand %s -> %d servers; per service, level (need): %s",
                 self.level, level, needs or "no load seen")  # fmt: skip
        self.level = level
        return [m.ServingDemand(level)]
