"""A MoE service's expert metrics: tokens per expert and replicas per expert.

Exported from the service's ingress, which sees every gate decision and holds the plan;
the names are in :mod:`lyra_ray.telemetry.catalogue`. WHY the replica gauge is re-set on
a timer: Ray drops a gauge series not set again for ~20 s, and the plan may stay the
same for hours.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import numpy.typing as npt

from lyra_ray.telemetry.catalogue import metric

log = logging.getLogger(__name__)

REFRESH_S = 5.0


class ExpertMetrics:
    def __init__(self, service: str) -> None:
        from ray.util.metrics import Counter, Gauge

        tokens, replicas = (
            metric("lyra_moe_expert_tokens_total"),
            metric("lyra_moe_expert_replicas"),
        )
        self.service = service
        self.tokens = Counter(tokens.ray_name, tokens.help, tag_keys=tokens.labels)
        self.replicas = Gauge(replicas.ray_name, replicas.help, tag_keys=replicas.labels)
        self.counts: npt.NDArray[np.int64] | None = None
        self._task: asyncio.Task[None] | None = None

    def _tags(self, layer: int, expert: int) -> dict[str, str]:
        return {"service": self.service, "layer": str(layer), "expert": str(expert)}

    def routed(self, layer: int, counts: npt.NDArray[np.int64]) -> None:
        """The gate sent ``counts[e]`` tokens of one request to expert ``e`` of ``layer``."""
        for e, n in enumerate(counts.tolist()):
            if n > 0:
                self.tokens.inc(float(n), tags=self._tags(layer, e))

    def planned(self, counts: npt.NDArray[np.int64]) -> None:
        """A new plan: replicas per [layer, expert]; starts the refresher once."""
        self.counts = counts.copy()
        self._publish()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh())

    def _publish(self) -> None:
        if self.counts is None:
            return
        for layer, row in enumerate(self.counts.tolist()):
            for e, c in enumerate(row):
                self.replicas.set(float(c), tags=self._tags(layer, e))

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                self._publish()
            except Exception:  # metrics must never take the service down
                log.debug("publishing replica counts failed", exc_info=True)
