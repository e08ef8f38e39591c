"""The loop's observer that exports ``lyra_team_*`` and says when guarantees no longer
fit the cluster (a node left, a config's quotas never checked against the nodes)."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from lyra_ray.runtime.teams.registry import TeamRegistry

if TYPE_CHECKING:
    from lyra_ray.runtime.metrics import SchedulerMetrics
    from lyra_ray.scheduling.core import SchedulerCore

log = logging.getLogger(__name__)


class TeamMetrics:
    """Every :attr:`EVERY_S`: each team's guarantee, use, borrowed and lent capacity by
    GPU type (or ``effective``, in reference units) as gauges while export is on, and the
    registry's check of the guarantees against the cluster as it is now."""

    EVERY_S = 5.0
    """How often: well within the ~20 s after which Ray drops a series not set again,
    and a snapshot's cost is not paid every cycle."""

    def __init__(self, registry: TeamRegistry, metrics: SchedulerMetrics | None) -> None:
        self.registry, self.metrics = registry, metrics
        self._at = -math.inf

    def observe(self, core: SchedulerCore, cycle: Any) -> None:
        now = time.monotonic()
        if now - self._at < self.EVERY_S:
            return
        self._at = now
        if not self.registry.set.any_limited and (self.metrics is None or not self.metrics.enabled):
            return
        snap = core.snapshot()
        self.registry.check_capacity(snap)
        if self.metrics is not None and self.metrics.enabled:
            self.metrics.observe_teams(self.registry.standings(snap))
