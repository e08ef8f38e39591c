"""The control actor: the mailbox between running Train loops and the scheduler.

It is a separate detached actor (not the scheduler itself) so that killing or
restarting the scheduler never blocks a training loop: loops keep reporting here,
and a restarted scheduler reads the records back. Records are *levels*, not edges —
the newest steps, outcome and worker placement per job and run generation — so a
scheduler that crashed between reading and persisting simply reads them again.

It is also the mailbox of each job's gang (:mod:`lyra_ray.runtime.gang`): a run's
request is left here by ``begin`` before anything starts, so it is the cluster's, not
the scheduler's, the moment ``begin`` returns (a scheduler killed right after loses
nothing: the gang picks the request up here); a stop request says which of the run's
GPUs the next generation keeps.
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
        self.requests: dict[str, tuple[int, Any]] = {}
        """Per job: (generation, the run's request) for its gang; kept out of the
        records, which every poll reads whole."""

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

    def begin(self, job_id: str, generation: int, request: Any = None) -> None:
        """A run of ``generation`` starts; ``request``: what its gang is to run."""
        self._rec(job_id, generation)
        if request is not None:
            self.requests[job_id] = (generation, request)

    def launch_request(self, job_id: str, after: int) -> tuple[int, Any] | None:
        """The gang's newest request, if newer than generation ``after`` (the gang's)."""
        got = self.requests.get(job_id)
        return got if got is not None and got[0] > after else None

    def accepted(self, job_id: str, generation: int) -> bool:
        """The gang took the run in; False when a newer generation superseded it."""
        r = self._rec(job_id, generation)
        if r is not None:
            r.setdefault("accepted", time.time())
        return r is not None

    def request_stop(
        self, job_id: str, generation: int, keep: dict[str, float] | None = None
    ) -> None:
        """Ask the run to stop; ``keep``: GPUs per node its next generation will hold
        again (a resize), which its gang keeps instead of freeing (None: free all)."""
        r = self._rec(job_id, generation)
        if r is not None:
            r["stop"] = True
            r["keep"] = dict(keep or {})

    def stop_info(self, job_id: str, generation: int) -> dict[str, Any]:
        """For the gang at the end of a run: whether it was asked to stop and what the
        next generation keeps (a newer generation's request counts as a stop)."""
        r = self.records.get(job_id)
        if r is None:
            return {"stop": False, "keep": {}}
        if r["generation"] > generation:
            return {"stop": True, "keep": {}, "superseded": True}
        return {"stop": bool(r["stop"]), "keep": dict(r.get("keep") or {})}

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

    def note(self, job_id: str, generation: int, **stamps: float) -> None:
        """Timestamps a gang adds to its run's record (``relaunched``: the new
        generation's members picked, before its process group forms)."""
        r = self._rec(job_id, generation)
        if r is not None:
            for k, v in stamps.items():
                r.setdefault(k, float(v))

    def forget(self, job_id: str) -> None:
        self.records.pop(job_id, None)
        self.requests.pop(job_id, None)


def get_or_create_control() -> Any:
    """The one control actor of the cluster (created on the head node on first use)."""
    return RunControl.options(  # type: ignore[attr-defined]
        name=CONTROL_ACTOR,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={"node:__internal_head__": 0.001},
    ).remote()
