"""The control actor: the mailbox between running Train loops and the scheduler.

It is a separate detached actor (not the scheduler itself) so that killing or
restarting the scheduler never blocks a training loop: loops keep reporting here,
and a restarted scheduler reads the records back. Records are *levels*, not edges —
the newest steps, outcome and worker placement per job and run generation — so a
scheduler that crashed between reading and persisting simply reads them again.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from lyra_ray.contract.names import CONTROL_ACTOR, NAMESPACE


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=64)  # type: ignore[call-overload]
class RunControl:
    """Per job: generation, stop flag, steps done, steps/s, outcome, workers."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.placements: list[dict[str, Any]] = []
        """Every worker's own report of where it ran: an audit trail kept for tests."""

    def _rec(self, job_id: str, generation: int) -> dict[str, Any] | None:
        r = self.records.get(job_id)
        if r is None or r["generation"] < generation:
            r = {
                "generation": generation,
                "stop": False,
                "steps": 0.0,
                "steps_per_s": None,
                "outcome": None,
                "message": "",
                "workers": {},
                "updated": time.time(),
            }
            self.records[job_id] = r
        return r if r["generation"] == generation else None

    def begin(self, job_id: str, generation: int) -> None:
        self._rec(job_id, generation)

    def request_stop(self, job_id: str, generation: int) -> None:
        r = self._rec(job_id, generation)
        if r is not None:
            r["stop"] = True

    def should_stop(self, job_id: str, generation: int) -> bool:
        """True when asked to stop, or when a newer run of the job superseded this one."""
        r = self.records.get(job_id)
        if r is None:
            return False
        stop = bool(r["generation"] > generation or r["stop"])
        if stop and r["generation"] == generation and r.get("stop_seen") is None:
            r["stop_seen"] = time.time()  # the loop saw it: a resize's first phase ends
        return stop

    def progress(self, job_id: str, generation: int, steps: float, sps: float | None) -> None:
        r = self._rec(job_id, generation)
        if r is not None and r["outcome"] is None:
            if r.get("first_step") is None:
                r["first_step"] = time.time()
            r["steps"] = max(r["steps"], float(steps))
            if sps:
                r["steps_per_s"] = float(sps)
            r["updated"] = time.time()

    def worker(
        self, job_id: str, generation: int, rank: int, node_id: str, labels: dict[str, str]
    ) -> None:
        r = self._rec(job_id, generation)
        if r is not None:
            r["workers"][int(rank)] = {"node_id": node_id, "labels": dict(labels)}
            r.setdefault("workers_up", time.time())
        self.placements.append(
            {
                "job_id": job_id,
                "generation": generation,
                "rank": int(rank),
                "node_id": node_id,
                "labels": dict(labels),
            }
        )
        del self.placements[:-10000]

    def finish(
        self, job_id: str, generation: int, outcome: str, steps: float, message: str = ""
    ) -> None:
        """``outcome``: completed | stopped | failed (written once per generation)."""
        r = self._rec(job_id, generation)
        if r is not None and r["outcome"] is None:
            r["outcome"] = outcome
            r["steps"] = max(r["steps"], float(steps))
            r["message"] = message
            r["updated"] = r["finished_at"] = time.time()

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v, workers=dict(v["workers"])) for k, v in self.records.items()}

    def history(self) -> list[dict[str, Any]]:
        return list(self.placements)

    def forget(self, job_id: str) -> None:
        self.records.pop(job_id, None)


def get_or_create_control() -> Any:
    """The one control actor of the cluster (created on the head node on first use)."""
    return RunControl.options(  # type: ignore[attr-defined]
        name=CONTROL_ACTOR,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={"node:__internal_head__": 0.001},
    ).remote()
