"""The phases of every resize and preemption, as they happen on the live cluster.

Why: the price of a restart (``resize_cost_s`` in the Lyra policy, the simulator's
resize overhead) used to be a guess. Each resize now leaves a record of where its time
went, read from the control actor's timestamps (the loop's own clock on the head node)
and the runtime's:

* ``stop_signal_s``: from the scheduler's decision (the end of the core's ``decide``)
  to the loop seeing the stop (between two steps): the cycle's commit, the stop request
  through the control actor, the loop's poll. Until #47 it counted from the request;
  the decision's moment is kept as ``decided`` and the request's as ``apply_s`` after it;
* ``checkpoint_s``: from seeing it to the last checkpoint written and the loop returned;
* ``relaunch_s``: from there to the next generation's start (the scheduler noticing,
  the GPUs let go, the run submitted);
* ``workers_up_s``: from the start to the first worker reporting from its node (a
  process per worker, torch imported, the process group formed);
* ``first_step_s``: from there to the first step (the checkpoint restored, one step);
* ``total_s``: from the decision to the first step of the new generation.

A preemption has the first two only (its next start is another decision). Records are
kept for ``lyra status``, the metrics and the benchmark (``benchmarks/resize_phases.py``),
bounded, and saved with the runtime's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PHASES = ("stop_signal_s", "checkpoint_s", "relaunch_s", "workers_up_s", "first_step_s")
KEEP = 200
"""Finished records kept (newest last)."""


def _gap(a: Any, b: Any) -> float | None:
    return round(float(b) - float(a), 3) if a is not None and b is not None else None


class RestartPhases:
    """Owns the open and finished phase records (one open record per job at most)."""

    def __init__(self) -> None:
        self.open: dict[str, dict[str, Any]] = {}
        self.done: list[dict[str, Any]] = []
        self._fresh: list[dict[str, Any]] = []
        self._for_core: list[dict[str, Any]] = []
        """Records finished since the core last took them (its restart model learns each
        job's own restart price from them: ``lyra_ray.model.restart_cost``)."""

    def requested(
        self, job_id: str, generation: int, workers: int, now: float, decided: float | None = None
    ) -> None:
        """A stop was asked at ``now`` for the decision taken at ``decided`` (its
        phases start there; at the request when the decision's moment is unknown)."""
        if job_id in self.open:  # asked again before the last restart's run stepped
            self.open[job_id]["interrupted"] = True
            self._close(job_id)
        start = now if decided is None or decided > now else decided
        self.open[job_id] = {"job_id": job_id, "from_generation": generation,
                             "from_workers": workers, "requested": now,
                             "decided": start}  # fmt: skip

    def stopped(self, job_id: str, rec: Mapping[str, Any] | None, resize: bool, now: float) -> None:
        """The old run let go (``rec``: its control record, None if it was killed)."""
        r = self.open.get(job_id)
        if r is None:
            return
        rec = rec or {}
        r["stop_seen"] = rec.get("stop_seen")
        r["checkpointed"] = rec.get("finished_at") or now
        r["kind"] = "resize" if resize else "preempt"
        if not resize:
            self._close(job_id)

    def relaunched(self, job_id: str, generation: int, workers: int, now: float) -> None:
        r = self.open.get(job_id)
        if r is not None and "checkpointed" in r:
            r.update(generation=generation, to_workers=workers, relaunched=now)

    def observe(self, job_id: str, generation: int, rec: Mapping[str, Any] | None) -> None:
        """The new generation's record: closes the resize once it has stepped."""
        r = self.open.get(job_id)
        if r is None or r.get("generation") != generation or not rec:
            return
        if rec.get("first_step") is not None:
            r["workers_up"] = rec.get("workers_up")
            r["first_step"] = rec["first_step"]
            self._close(job_id)

    def forget(self, job_id: str) -> None:
        self.open.pop(job_id, None)

    def _close(self, job_id: str) -> None:
        r = self.open.pop(job_id)
        start = r.get("decided", r["requested"])  # a record saved before #47 has none
        phases = {
            "stop_signal_s": _gap(start, r.get("stop_seen")),
            "checkpoint_s": _gap(r.get("stop_seen") or start, r.get("checkpointed")),
            "relaunch_s": _gap(r.get("checkpointed"), r.get("relaunched")),
            "workers_up_s": _gap(r.get("relaunched"), r.get("workers_up")),
            "first_step_s": _gap(r.get("workers_up") or r.get("relaunched"), r.get("first_step")),
        }
        out = {
            "job_id": job_id,
            "kind": r.get("kind", "resize"),
            "from_workers": r["from_workers"],
            "to_workers": r.get("to_workers"),
            "generation": r.get("generation", r["from_generation"]),
            "at": start,
            "apply_s": _gap(start, r["requested"]),
            "phases": {k: v for k, v in phases.items() if v is not None},
            "total_s": _gap(start, r.get("first_step") or r.get("checkpointed")),
        }
        if r.get("interrupted"):  # its run never stepped: the phases it reached only
            out["interrupted"] = True
        self.done = [*self.done[-(KEEP - 1) :], out]
        self._fresh.append(out)
        self._for_core.append(out)

    def take_fresh(self) -> list[dict[str, Any]]:
        """Records finished since the last call (for the metrics exporter)."""
        out, self._fresh = self._fresh, []
        return out

    def take_for_core(self) -> list[dict[str, Any]]:
        """Records finished since the last call (the scheduler core's restart model)."""
        out, self._for_core = self._for_core, []
        return out

    def last(self, job_id: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.done) if r["job_id"] == job_id), None)

    def to_state(self) -> dict[str, Any]:
        return {"open": dict(self.open), "done": list(self.done)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.open = dict(state.get("open", {}))
        self.done = list(state.get("done", []))
