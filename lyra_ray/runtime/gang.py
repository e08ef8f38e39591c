"""A job's gang: the warm processes that run its generations, and their GPU slots.

WHY: a resize used to end a whole Ray Train run and start another (a controller, a
placement group, a process per worker importing torch and Ray Train, the process group):
half a minute on this host for a tiny model, almost all of it start-up
(``benchmarks/results/resize_phases.json``, its ``baseline`` run, side by side with this
path and split at the workers' own moments). A gang keeps the job's worker processes
(:mod:`lyra_ray.runtime.gang_worker`) from one generation to the next: the workers that
stay keep their process, their GPU slot and the job's imported code; the ones that leave
give their slot back (:mod:`lyra_ray.runtime.gpu_slots`) and wait, warm, as spares on
their node; a grow fills new slots with spares first. Only a node where no spare waits
pays for a new process.

Protocol, unchanged for the scheduler (:mod:`lyra_ray.runtime.runs`): a run is asked for
through the control actor (``begin`` leaves the request there, so a scheduler killed
right after loses nothing), stopped through it (``request_stop``, the loop's own poll),
and ends with ``finish`` there. The gang takes one generation at a time, never two
together; a newer request supersedes the running generation, whose loop then stops at
its next step as if asked. At a run's end the gang frees every GPU slot except those the
stop request said the next generation keeps (a resize's stayers); everything else the
scheduler counted as free is free when ``finish`` is recorded, as with Ray Train. Its
workers and their slots are :class:`~lyra_ray.runtime.gang_crew.Crew`'s.

One gang per job, detached, named (``lyra-gang-<job>``), on the head node like the
scheduler, created with the job's runtime env, which its workers inherit. Its workers
and slots are its own: killing the gang ends them all (the runtime does, when the job
ends).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray

from lyra_ray.contract.names import RESUME_KEY
from lyra_ray.runtime import gang_plan, gpu_slots
from lyra_ray.runtime.actor_log import actor_logging
from lyra_ray.runtime.control import get_or_create_control
from lyra_ray.runtime.gang_crew import Crew, Worker
from lyra_ray.runtime.run_outcome import code_failure, crash_line
from lyra_ray.runtime.run_request import RunRequest, run_name
from lyra_ray.train.backend_rule import resolve_backend
from lyra_ray.train.storage import join, last_reported, newest_checkpoint, read_step

log = logging.getLogger(__name__)

POLL_S = 1.0
"""The gang looks for a new request at least this often (a ``wake`` comes sooner)."""
STOP_CHECK_S = 0.2
"""While a run starts (slots placed, workers made), how often it checks for a stop."""


@dataclass
class Settings:
    spare_ttl_s: float = 300.0
    """A spare idle this long ends: a job preempted for hours holds no memory for it."""
    keep_ttl_s: float = 120.0
    """Slots kept for a next generation that does not come within this are freed (the
    scheduler changed its mind while it was down; it also frees them, :meth:`Gang.release`)."""
    start_timeout_s: float = 600.0
    """A new worker process (the job's code imported) may take this long."""
    pg_timeout_s: float = 300.0
    """torch.distributed's rendezvous timeout for the run's process group."""


class _Stopped(Exception):
    """The starting run was asked to stop (or aborted) before it stepped."""


@ray.remote(num_cpus=0, max_restarts=0, max_concurrency=8)  # type: ignore[call-overload]
class Gang:
    def __init__(
        self,
        job_id: str,
        settings: Mapping[str, Any] | None = None,
        first: tuple[int, RunRequest] | None = None,
    ) -> None:
        """``first``: the run it is created for (also waiting in the control actor)."""
        actor_logging()
        self.job_id = job_id
        self.settings = Settings(**dict(settings or {}))
        self.control = get_or_create_control()
        self.crew = Crew(job_id, self.settings.spare_ttl_s, self.settings.keep_ttl_s)
        self.wakeup = threading.Event()
        self.generation = 0
        """The newest generation this gang took in."""
        self.running: int | None = None
        self.aborted: set[int] = set()
        self.latest: tuple[str, int] | None = None
        """The newest checkpoint this gang's runs persisted (saves rescanning storage
        at a resize); dropped whenever a run ends without telling (killed, crashed)."""
        self.events: list[dict[str, Any]] = []
        """Per run: where its start-up went (for the benchmark's breakdown)."""
        self.handed: tuple[int, RunRequest] | None = first
        """The newest request handed over directly (``wake``), beside the control
        actor's copy: a control actor that restarted has lost its copy."""
        threading.Thread(target=self._main, name="lyra-gang", daemon=True).start()

    # ------------------------------------------------------------------ calls

    def wake(self, generation: int = 0, request: RunRequest | None = None) -> None:
        """A request is waiting in the control actor (and here): look now."""
        if request is not None and (self.handed is None or generation > self.handed[0]):
            self.handed = (generation, request)
        self.wakeup.set()

    def abort(self, generation: int) -> bool:
        """Hard stop of ``generation`` (past its grace, its node lost): its workers are
        killed, not asked; their slots freed. Nothing for an older generation."""
        if generation < self.generation or (
            generation == self.generation and self.running != generation
        ):
            return False
        self.aborted.add(generation)
        self.wakeup.set()
        return True

    def release(self) -> None:
        """No next generation comes soon (the job was stopped, not resized): free the
        slots kept for one."""
        if self.running is None:
            self.crew.free_kept()

    def info(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "running": self.running,
            "members": self.crew.info(),
            "events": list(self.events[-20:]),
        }

    # ------------------------------------------------------------------ the loop

    def _main(self) -> None:
        while True:
            self.wakeup.wait(POLL_S)
            self.wakeup.clear()
            try:
                self._next()
            except Exception:  # the control actor restarting, say: look again soon
                log.exception("gang of %s: looking for its next run failed", self.job_id)

    def _next(self) -> None:
        """Take the newest request in, if newer than the last, and run it to its end."""
        got = ray.get(self.control.launch_request.remote(self.job_id, self.generation))
        handed = self.handed
        if handed is not None and handed[0] > max(self.generation, got[0] if got else 0):
            got = handed
        if got is None:
            self.crew.expire()
            return
        gen, req = got
        if not ray.get(self.control.accepted.remote(self.job_id, gen)):
            self.generation = gen
            return  # superseded before it started
        self.generation, self.running = gen, gen
        try:
            outcome, steps, message = self._run(gen, req)
        except Exception as e:  # a bug of ours: the run must still end, once
            log.exception("run %s g%d failed in the gang", self.job_id, gen)
            self._end_running()
            outcome, steps, message = "crashed", self._resume_step(req), f"gang: {e}"[:500]
        finally:
            self.running = None
            self.aborted.discard(gen)
        for _ in range(60):  # the run's end must reach the scheduler: retry a restarting control
            try:
                ray.get(self.control.finish.remote(self.job_id, gen, outcome, steps, message))
                return
            except Exception:
                log.warning("control actor unreachable: finish of g%d again", gen, exc_info=True)
                time.sleep(1.0)

    # ------------------------------------------------------------------ one run

    def _stop_asked(self, gen: int) -> bool:
        if gen in self.aborted:
            return True
        info = ray.get(self.control.stop_info.remote(self.job_id, gen))
        return bool(info["stop"])

    def _resume_step(self, req: RunRequest) -> float:
        found = self._resume(req)
        return float(found[1]) if found else 0.0

    def _resume(self, req: RunRequest) -> tuple[str, int] | None:
        if self.latest is not None:
            return self.latest
        return newest_checkpoint(join(req.storage_path, run_name(req.job_id)))

    def _run(self, gen: int, req: RunRequest) -> tuple[str, float, str]:
        t0 = time.time()
        resume = self._resume(req)
        steps0 = float(resume[1]) if resume else 0.0
        self.latest = None  # until this run says where it left off
        try:
            workers, stamps = self._assemble(gen, req)
        except _Stopped:
            self.crew.free_kept()
            return "stopped", steps0, ""
        except ray.exceptions.RayActorError as e:  # a new worker died starting
            self._end_running()
            return "crashed", steps0, f"a worker died starting: {crash_line(0, e)}"[:500]
        config = dict(req.config)
        config.update(total_steps=req.total_steps, lyra_job_id=req.job_id, lyra_generation=gen)
        if resume is not None:
            config[RESUME_KEY] = resume[0]
        # ray.train.get_checkpoint(): the checkpoint the loop reported last, whatever it
        # holds, as Ray Train hands a rerun of the same name; lyra's step hint rides in
        # the config (StepLoop.restore takes the better of the two)
        handed = last_reported(join(req.storage_path, run_name(req.job_id)))
        if handed is None and resume is not None:
            handed = resume[0]
        ranks = gang_plan.ranks([(m.key, m.node, m.rank) for m in workers])
        order = sorted(workers, key=lambda m: ranks[m.key].rank)
        try:
            cuda = ray.get([m.actor.bind.remote(m.slot.gpu_ids if m.slot else None) for m in order])
            master = ray.get(order[0].actor.endpoint.remote())
        except ray.exceptions.RayActorError as e:  # a warm worker died between runs
            self._end_running()
            return "crashed", steps0, f"a worker died before the run: {crash_line(0, e)}"[:500]
        backend = resolve_backend(req.backend, [bool(c) for c in cuda])
        refs: dict[Any, Worker] = {}
        with self.crew.lock:
            for m in order:
                r = ranks[m.key]
                m.rank = r.rank
                spec = {
                    "rank": r.rank,
                    "local_rank": r.local_rank,
                    "world": len(order),
                    "local_world": r.local_world,
                    "node_rank": r.node_rank,
                    "master": master,
                    "backend": backend,
                    "config": config,
                    "run_name": run_name(req.job_id),
                    "storage_path": req.storage_path,
                    "resume": handed,
                    "timeout_s": self.settings.pg_timeout_s,
                }
                refs[m.actor.run.remote(spec)] = m
        stamps["running"] = time.time()
        self.events = [*self.events[-19:], {"generation": gen, "accepted": t0, **stamps}]
        return self._watch(gen, req, refs, steps0)

    def _assemble(self, gen: int, req: RunRequest) -> tuple[list[Worker], dict[str, Any]]:
        """The run's workers, each holding a placed slot: stayers, spares, new ones."""
        stamps: dict[str, Any] = {}
        crew = self.crew
        with crew.lock:
            crew.release_other_sizes(req.gpu_per_worker)
            p = gang_plan.plan(crew.view(), req.label_selectors)
            for key in p.release:
                crew.give_back(crew.workers[key])
            kept = [crew.workers[k] for k in p.keep]
            crew.clear_kept()
        stamps.update(kept=len(kept), slots=len(p.new_slots))
        slots = [gpu_slots.reserve(req.gpu_per_worker, s) for s in p.new_slots]
        try:
            self._place(gen, slots)
            stamps["placed"] = time.time()
            joined, cold = self._fill(gen, req, slots)
        except BaseException:
            with crew.lock:
                held = {id(w.slot) for w in crew.workers.values()}
            for s in slots:
                if id(s) not in held:
                    gpu_slots.free(s)
            raise
        stamps.update(spares=len(joined) - cold, cold=cold, filled=time.time())
        return kept + joined, stamps

    def _place(self, gen: int, slots: list[gpu_slots.Slot]) -> None:
        pending = list(slots)
        while pending:
            pending = [s for s in pending if not gpu_slots.placed(s, STOP_CHECK_S)]
            if pending and self._stop_asked(gen):
                raise _Stopped

    def _fill(
        self, gen: int, req: RunRequest, slots: list[gpu_slots.Slot]
    ) -> tuple[list[Worker], int]:
        """A worker per slot: a spare on its node, else a new process; returns the
        workers and how many were new."""
        crew = self.crew
        joined: list[Worker] = []
        new: list[Worker] = []
        with crew.lock:
            spares = crew.spares()
            taken: set[int] = set()
            for s in slots:
                assert s.node_id is not None
                key = gang_plan.pick_spare(spares, s.node_id, taken)
                if key is None:
                    w = crew.spawn(s.node_id, req.entrypoint)
                    new.append(w)
                else:
                    taken.add(key)
                    w = crew.workers[key]
                w.slot = s
                joined.append(w)
        if new:
            self._await_started(gen, new)
        for w in joined:
            if w.gpus and w.slot is not None and w.slot.gpu_ids is None:
                gpu_slots.gpu_ids(w.slot)
        return joined, len(new)

    def _await_started(self, gen: int, new: list[Worker]) -> None:
        refs = {m.actor.info.remote(): m for m in new}
        deadline = time.time() + self.settings.start_timeout_s
        while refs:
            done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=STOP_CHECK_S)
            for ref in done:
                m = refs.pop(ref)
                info = ray.get(ref)  # raises RayActorError if it could not start
                m.pid, m.gpus, m.started_s = info["pid"], bool(info.get("gpus")), info["started_s"]
            if refs and (self._stop_asked(gen) or time.time() > deadline):
                raise _Stopped

    def _watch(
        self, gen: int, req: RunRequest, refs: dict[Any, Worker], steps0: float
    ) -> tuple[str, float, str]:
        """Until every worker's loop returned, one failed, or the run is aborted."""
        results: dict[int, dict[str, Any]] = {}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            self.crew.expire()  # spares wait out their time while a run goes on
            if gen in self.aborted:
                self._end_running()
                return "stopped", steps0, ""
            for ref in done:
                m = refs[ref]
                try:
                    r = ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    self._end_running()
                    return "crashed", steps0, crash_line(m.rank or 0, e)
                if not r["ok"]:
                    self._end_running()
                    if r.get("user"):
                        return "failed", steps0, code_failure(m.rank or 0, r["error"])
                    return "crashed", steps0, f"Train worker rank {m.rank} failed: {r['error']}"
                results[m.rank or 0] = r
        first = results.get(0, {})
        step = (first.get("metrics") or {}).get("step")
        where = first.get("checkpoint")
        if where:  # rank 0's last checkpoint, named as the storage is (a path or a URI)
            step = int(step) if step is not None else read_step(where)
            self.latest = (where, step) if step is not None else None
        if step is None:  # the loop reported last without StepLoop's step (its own report)
            found = self._resume(req)
            step = found[1] if found else None
        steps = float(step) if step is not None else steps0
        outcome = "completed" if steps >= req.total_steps else "stopped"
        self._after(gen, outcome, results)
        return outcome, steps, ""

    def _after(self, gen: int, outcome: str, results: dict[int, dict[str, Any]]) -> None:
        """A run ended cleanly: slots the next generation keeps stay (a resize), with
        their workers as they are (the next run re-forms their process group); the rest
        are freed now, before ``finish``, and their workers drop the run's process group
        and garbage as spares, in the background: nothing waits on that (it took 0.5-1 s
        of each resize on this host, #47)."""
        keep: dict[str, float] = {}
        if outcome == "stopped":
            keep = dict(ray.get(self.control.stop_info.remote(self.job_id, gen))["keep"])
        crew = self.crew
        with crew.lock:
            for w in crew.holding():
                w.touched = bool(results.get(w.rank or 0, {}).get("cuda_touched", w.touched))
                if keep.get(w.node, 0) >= 1:
                    keep[w.node] -= 1
                    crew.keep(w)
                    continue
                crew.give_back(w)
                if w.key in crew.workers:  # a spare now: let it tidy up, unwaited
                    w.actor.leave.remote()

    def _end_running(self) -> None:
        """The run failed or was aborted: none of its workers is reused, and where it
        left off is read from storage again."""
        self.latest = None
        self.crew.end_running()
