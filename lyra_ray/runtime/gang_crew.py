"""A gang's members: its warm worker processes, the GPU slot each holds, and the spares.

Kept apart from the gang's run lifecycle (:mod:`lyra_ray.runtime.gang`) because it owns
different state: which processes exist, where, holding what, and since when idle. The
rules of who keeps a slot are :mod:`lyra_ray.runtime.gang_plan`'s; this carries them out
and never leaves a slot without a member or a member it cannot account for.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.runtime import gang_plan, gpu_slots
from lyra_ray.runtime.gang_worker import GangWorker

log = logging.getLogger(__name__)


@dataclass
class Worker:
    """One warm process of the gang, as the gang sees it."""

    key: int
    actor: Any
    node: str
    pid: int = 0
    slot: gpu_slots.Slot | None = None
    rank: int | None = None
    """Its rank in the last run while it holds a slot; None for a spare."""
    touched: bool = False
    """Its process touched CUDA: it can serve only the GPUs it has."""
    idle_since: float = field(default_factory=time.time)
    gpus: bool = False
    """Its node has NVIDIA GPUs (its slot's ids must be read and bound)."""
    started_s: float = 0.0


class Crew:
    """The gang's workers (one lock for every change; the gang's threads share it)."""

    def __init__(self, job_id: str, spare_ttl_s: float, keep_ttl_s: float) -> None:
        self.job_id = job_id
        self.spare_ttl_s, self.keep_ttl_s = spare_ttl_s, keep_ttl_s
        self.lock = threading.RLock()
        self.workers: dict[int, Worker] = {}
        self._keys = 0
        self.kept_at = 0.0
        """When slots were last kept for a next generation (0: none kept)."""

    def view(self) -> list[gang_plan.Member]:
        with self.lock:
            return [
                gang_plan.Member(w.key, w.node, w.rank, w.touched) for w in self.workers.values()
            ]

    def spares(self) -> list[gang_plan.Member]:
        with self.lock:
            return [
                gang_plan.Member(w.key, w.node, None, w.touched)
                for w in self.workers.values()
                if w.slot is None
            ]

    def holding(self) -> list[Worker]:
        """The workers holding a slot, by their last rank."""
        with self.lock:
            return sorted((w for w in self.workers.values() if w.slot is not None),
                          key=lambda w: w.rank or 0)  # fmt: skip

    def spawn(self, node: str, entrypoint: str) -> Worker:
        """A new warm process on ``node`` (its creation is not waited for here)."""
        with self.lock:
            self._keys += 1
            actor = GangWorker.options(  # type: ignore[attr-defined]
                label_selector={NODE_ID_LABEL: node}
            ).remote(self.job_id, entrypoint)
            w = Worker(self._keys, actor, node)
            self.workers[w.key] = w
            return w

    def give_back(self, w: Worker) -> None:
        """Free ``w``'s slot; it waits as a spare, or ends if bound to its GPUs."""
        with self.lock:
            if w.slot is not None:
                gpu_slots.free(w.slot)
                w.slot = None
            w.rank = None
            w.idle_since = time.time()
            if w.touched:
                self.end(w)

    def keep(self, w: Worker) -> None:
        """``w`` keeps its slot for the next generation (freed after ``keep_ttl_s`` if
        that does not come)."""
        with self.lock:
            self.kept_at = time.time()

    def clear_kept(self) -> None:
        """The next generation took the kept slots in."""
        with self.lock:
            self.kept_at = 0.0

    def free_kept(self) -> None:
        with self.lock:
            for w in list(self.workers.values()):
                if w.slot is not None:
                    self.give_back(w)
            self.kept_at = 0.0

    def release_other_sizes(self, gpus: float) -> None:
        """Slots of another size than a run's (a pair formed or split) are freed."""
        with self.lock:
            for w in list(self.workers.values()):
                if w.slot is not None and w.slot.gpus != gpus:
                    self.give_back(w)

    def end(self, w: Worker) -> None:
        with self.lock:
            if w.slot is not None:
                gpu_slots.free(w.slot)
                w.slot = None
            self.workers.pop(w.key, None)
        try:
            ray.kill(w.actor, no_restart=True)
        except Exception:
            log.debug("worker %d already gone", w.key, exc_info=True)

    def end_running(self) -> None:
        """A run failed or was aborted: its workers may be stuck in a collective with a
        dead peer, so none of them is reused."""
        with self.lock:
            for w in list(self.workers.values()):
                if w.slot is not None or w.rank is not None:
                    self.end(w)

    def expire(self) -> None:
        """Spares idle past their time end; slots kept for a next generation that has
        not come are freed."""
        now = time.time()
        with self.lock:
            for w in list(self.workers.values()):
                if w.slot is None and now - w.idle_since > self.spare_ttl_s:
                    log.info("spare %d on %s idle %.0f s: ending it", w.key, w.node,
                             now - w.idle_since)  # fmt: skip
                    self.end(w)
            if self.kept_at and now - self.kept_at > self.keep_ttl_s:
                self.free_kept()

    def info(self) -> list[dict[str, Any]]:
        with self.lock:
            return [
                {
                    "key": w.key,
                    "node_id": w.node,
                    "pid": w.pid,
                    "rank": w.rank,
                    "slot": w.slot is not None,
                    "gpu_ids": w.slot.gpu_ids if w.slot else None,
                    "touched": w.touched,
                }
                for w in self.workers.values()
            ]
