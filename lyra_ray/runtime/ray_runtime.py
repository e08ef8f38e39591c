"""RayRuntime: carries the core's actions out on Ray and turns what happens into events.

It decides nothing. A Launch starts a Ray Train run where the assignment says; a
Preempt asks the run to checkpoint and stop (and kills it after ``grace_s``); a Resize
is a Preempt followed by a Launch of the next generation once the old run has let go
of its GPUs. :meth:`poll` reads the inventory and the control actor's records and
reports NodeUp/NodeDown, JobProgress, JobCompleted, JobStopped (after a Preempt only)
and JobFailed.

Its table of runs is serialisable so that a restarted scheduler can pick up runs that
kept going while it was down; :meth:`reconcile` then makes reality match the core's
current decisions (start what the core believes runs but does not, stop what runs but
should not) — carrying out decisions already taken, never taking new ones.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, ClassVar

import ray

from lyra_ray import model as m
from lyra_ray.model.mixed import with_batch_shares
from lyra_ray.model.state import assignment_from_dict, assignment_to_dict
from lyra_ray.parallelism.jobs import run_config
from lyra_ray.runtime import reconcile, runs, stale_pgs
from lyra_ray.runtime.control import get_or_create_control
from lyra_ray.runtime.gang_plan import kept_gpus
from lyra_ray.runtime.inventory import Inventory
from lyra_ray.runtime.launch_log import Launch, LaunchLog
from lyra_ray.runtime.restart_phases import RestartPhases
from lyra_ray.runtime.run_record import MAX_UNEXPECTED_ENDS, START_GRACE_S, RunRecord
from lyra_ray.train.storage import newest_checkpoint

log = logging.getLogger(__name__)


class RayRuntime:
    """The live :class:`lyra_ray.scheduling.core.Runtime`."""

    def __init__(
        self,
        specs: Callable[[str], m.JobSpec],
        storage_path: str,
        grace_s: float = 30.0,
        node_ready: Callable[[str], bool] | None = None,
        max_restarts: int = MAX_UNEXPECTED_ENDS,
        run_options: Callable[[str], Mapping[str, Any]] | None = None,
        speeds: Callable[[m.JobSpec, str], float] | None = None,
        executor: str = "warm",
        gang_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """``node_ready(node)``
        says whether training may use a server yet (a lent server is ready once its
        Serve replicas have left). A run bound for a server not ready waits.
        ``run_options(job)``: what travels beside the job's spec (``runtime_env``,
        ``backend``), read at every start so every generation gets it. ``speeds(spec,
        gpu_type)``: one worker's steps/s, to split a mixed-type run's batch by speed.
        ``executor``: how runs are carried out (:data:`runs.EXECUTORS`);
        ``gang_settings``: a gang's :class:`~lyra_ray.runtime.gang.Settings`."""
        if executor not in runs.EXECUTORS:
            raise ValueError(f"executor {executor!r} is not one of {', '.join(runs.EXECUTORS)}")
        self.executor = executor
        self.gang_settings = dict(gang_settings or {})
        self.decided_at: float | None = None
        """When the core took the decision the next ``apply`` carries out (wall clock;
        set by the live store before the sinks act): a restart's phases start there."""
        self.specs = specs
        self.speeds = speeds
        self.run_options = run_options
        self.node_ready = node_ready
        # a URI (s3://, file://, ...) is Ray Train's and pyarrow's to resolve
        self.storage_path = storage_path if "://" in storage_path else os.path.abspath(storage_path)
        self.grace_s = grace_s
        self.max_restarts = max_restarts
        self.inventory = Inventory()
        self.runs: dict[str, RunRecord] = {}
        self.trail = LaunchLog()
        """What ran: generations, launches, stop-to-start gaps (:mod:`.launch_log`)."""
        self.phases = RestartPhases()
        self.control = get_or_create_control()
        self.dirty = False
        self._pending: list[m.Event] = []
        """Events found outside poll() (by reconcile) and reported by the next poll()."""
        self.stale = stale_pgs.Sweep()
        self.waiting: dict[str, dict[str, Any]] = {}
        """Launches held until every server of their assignment is ready for training."""

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        return {
            "runs": {k: asdict(v) for k, v in sorted(self.runs.items())},
            **self.trail.to_state(),
            "waiting": dict(sorted(self.waiting.items())),
            "phases": self.phases.to_state(),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.runs = {k: RunRecord(**v) for k, v in state.get("runs", {}).items()}
        self.trail.load_state(state)
        self.waiting = dict(state.get("waiting", {}))
        self.phases.load_state(state.get("phases", {}))

    def forget(self, job_id: str) -> list[Launch]:
        """A job left the scheduler's state for the archive: drop what is kept per job
        (its generation counter, its launches, the control actor's record, which every
        poll reads whole), so that none grows with the jobs that have ended; returns
        its launches for the archive. It never runs again, so its generation numbers
        cannot be reused."""
        self.phases.forget(job_id)
        self.control.forget.remote(job_id)
        if job_id not in self.runs:
            runs.end_job(job_id)
        return self.trail.forget(job_id)

    def generation(self, job_id: str) -> int:
        """The job's latest generation (0: never started)."""
        return self.trail.generation(job_id)

    def seed_nodes(self, nodes: Iterable[m.Node]) -> None:
        """After a restart: start the inventory from the nodes the core believes in.

        The next refresh then diffs them with Ray's live nodes, so a node that left while
        the scheduler was down is reported as NodeDown (and its jobs re-queued) instead of
        staying in the core forever with jobs pinned to it.
        """
        self.inventory.nodes = {n.id: n for n in nodes}
        self.inventory.gpu_label = {n.id: n.gpu_type for n in nodes}

    # ------------------------------------------------------------------ actions

    def apply(self, actions: Sequence[m.Action]) -> None:
        for a in actions:
            if isinstance(a, m.Launch):
                self._launch_or_queue(a.job_id, assignment_to_dict(a.assignment))
            elif isinstance(a, m.Resize):
                self.stop(a.job_id, next_assignment=assignment_to_dict(a.assignment))
            elif isinstance(a, m.Preempt):
                self.stop(a.job_id, next_assignment=None)
            elif isinstance(a, m.Finish):
                self._finish(a.job_id)
            # Lend, Reclaim and ScaleServe are the serving pool's: the loop's other sink

    def _launch_or_queue(self, job_id: str, assignment: dict[str, Any] | None) -> None:
        assert assignment is not None
        r = self.runs.get(job_id)
        if r is not None and r.phase == "stopping":
            r.next_assignment = assignment  # start once the old run has let go
            self.dirty = True
            return
        if r is not None:
            log.warning("launch of %s while its run g%d is live: restarting", job_id, r.generation)
            self.kill(r)
        self.start(job_id, assignment)

    def _ready(self, assignment: Mapping[str, Any]) -> bool:
        return self.node_ready is None or all(self.node_ready(n) for n, _ in assignment["nodes"])

    def holds(self, node: str) -> bool:
        """Whether a run (or a held launch) of training is on ``node``."""
        bound = [r.assignment for r in self.runs.values()] + list(self.waiting.values())
        return any(n == node for a in bound for n, _ in a["nodes"])

    def start(self, job_id: str, assignment: dict[str, Any], unexpected: int = 0) -> None:
        """Start the job's next generation on ``assignment``, or hold it until every
        server there is ready for training (``unexpected``: ends counted so far)."""
        if not self._ready(assignment):
            log.info("launch of %s waits for its servers to be freed by serving", job_id)
            self.waiting[job_id] = assignment
            self.dirty = True
            return
        self.waiting.pop(job_id, None)
        spec = self.specs(job_id)
        if spec.entrypoint is None:
            raise ValueError(f"job {job_id} has no entrypoint")
        gen = self.trail.next_generation(job_id)
        a = assignment_from_dict(assignment)
        assert a is not None
        label = self.inventory.label_for_type(a.gpu_type)
        opts = self.run_options(job_id) if self.run_options is not None else {}
        req = runs.RunRequest(
            job_id=job_id,
            generation=gen,
            entrypoint=spec.entrypoint,
            total_steps=int(spec.total_steps),
            config=self._run_config(spec, a),
            workers=a.workers,
            label_selectors=runs.worker_selectors(
                label, a.nodes, a.workers, self.inventory.gpu_label
            ),
            storage_path=self.storage_path,
            runtime_env=opts.get("runtime_env") or None,
            backend=str(opts.get("backend") or "auto"),
            gpu_per_worker=0.5 if a.partner is not None else 1.0,
            executor=self.executor,
        )
        runs.start_run(req, self.gang_settings)
        now = time.time()
        # whether or not this scheduler asked for the stop itself: one killed mid-resize
        # left the record open in its state, and the one that carries the resize out
        # closes it (it only takes a record whose old run has let go)
        self.phases.relaunched(job_id, gen, a.workers, now)
        self.runs[job_id] = RunRecord(
            job_id, gen, assignment, now, unexpected_ends=unexpected, executor=self.executor
        )
        self.trail.launched(now, job_id, gen, assignment)
        self.dirty = True

    def _run_config(self, spec: m.JobSpec, a: m.Assignment) -> dict[str, Any]:
        """The config a run receives (a mixed-type run's with its batch shares)."""
        config = run_config(spec.config, a.gpu_type, a.workers)
        if not a.extra or self.speeds is None:
            return config
        speeds = {g: self.speeds(spec, g) for g, _ in a.parts}
        return with_batch_shares(config, speeds, a.parts, self.inventory.label_for_type)

    def stop(self, job_id: str, next_assignment: dict[str, Any] | None) -> None:
        """Ask the job's run to checkpoint and stop; ``next_assignment``: where its next
        generation starts once the old one has let go (None: a preemption)."""
        if job_id in self.waiting:
            self.waiting.pop(job_id)
            if next_assignment is None:
                self._pending.append(m.JobStopped(job_id, 0.0))
            else:
                self.start(job_id, next_assignment)
            self.dirty = True
            return
        r = self.runs.get(job_id)
        if r is None:
            if next_assignment is not None:
                self.start(job_id, next_assignment)
            return
        r.next_assignment = next_assignment
        keep = kept_gpus(r.assignment, next_assignment)
        if r.phase != "stopping":
            log.info(
                "asking run %s g%d to stop (%s)",
                job_id,
                r.generation,
                "preemption"
                if next_assignment is None
                else f"next: {next_assignment['workers']} workers",
            )
            r.phase, r.deadline = "stopping", time.time() + self.grace_s
            self.trail.stop_requested(job_id, time.time())
            self.phases.requested(
                job_id, r.generation, r.assignment["workers"], time.time(), self.decided_at
            )
        runs.request_stop(job_id, r.generation, keep)  # again while stopping: keep may differ
        self.dirty = True

    def _finish(self, job_id: str) -> None:
        self.waiting.pop(job_id, None)
        r = self.runs.pop(job_id, None)
        if r is not None:
            runs.request_stop(job_id, r.generation)
            self.kill(r)
            self.dirty = True
        runs.end_job(job_id)

    def kill(self, r: RunRecord) -> None:
        """End the run's processes now, without a checkpoint."""
        runs.kill_run(r.job_id, r.generation, r.executor)

    def busy(self) -> bool:
        """A run is stopping (a resize or preemption under way): the scheduler then
        polls often, so the next generation starts as soon as the old one let go."""
        return any(r.phase == "stopping" for r in self.runs.values())

    # ------------------------------------------------------------------ events

    reports_progress: ClassVar[bool] = False
    """Its progress reports cannot be held back (the control actor keeps only the last)."""

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        """As the loop's source (:mod:`lyra_ray.scheduling.loop`): :meth:`poll`."""
        return self.poll()

    def poll(self) -> list[m.Event]:
        events: list[m.Event] = [*self._pending, *self.inventory.refresh()]
        self._pending = []
        for jid, a in list(self.waiting.items()):
            if self._ready(a):
                self.start(jid, a)
        down = {e.node_id for e in events if isinstance(e, m.NodeDown)}
        self.stale.after_poll(bool(down), time.time())
        for jid, r in list(self.runs.items()):
            if any(n in down for n, _ in r.assignment["nodes"]):
                log.info("run %s g%d lost a node: dropping it", jid, r.generation)
                self.kill(r)
                del self.runs[jid]
                self.dirty = True
        if not self.runs:
            return events + self._restarts_measured()
        records: dict[str, dict[str, Any]] = ray.get(self.control.snapshot.remote())
        now = time.time()
        for jid, r in list(self.runs.items()):
            rec = records.get(jid)
            if rec is not None and rec["generation"] != r.generation:
                rec = None
            if rec is not None and rec["steps"] > r.reported_steps and rec["outcome"] is None:
                r.reported_steps = rec["steps"]
                # A stopping run's rate does not measure the assignment the core now holds
                # (resized, or a pair formed or split): found live, a lone run's last,
                # checkpointing window was credited as 1.2 steps/s beside its new partner.
                sps = rec["steps_per_s"] if r.phase == "running" else None
                events.append(m.JobProgress(jid, rec["steps"], sps))
            self.phases.observe(jid, r.generation, rec)
            if rec is not None and rec["outcome"] is not None:
                events += self._ended(r, rec["outcome"], rec["steps"], rec["message"], rec)
            elif r.phase == "stopping" and now > r.kill_after(rec):
                # Past the grace period: kill, never earlier: a run killed before its worker
                # group is up can leave its placement group holding the GPUs (the next
                # generation would wait forever); a starting run meets the stop flag at its
                # first step, and the core's minimum lease keeps rounds off starting runs.
                log.info("stopping run %s g%d by kill", jid, r.generation)
                self.kill(r)
                found = newest_checkpoint(os.path.join(self.storage_path, runs.run_name(jid)))
                events += self._ended(r, "stopped", float(found[1]) if found else 0.0, "", rec)
            elif now - r.launched_at > START_GRACE_S and not runs.run_alive(
                jid, r.generation, r.executor
            ):
                events += self._ended(r, "lost", r.reported_steps, "run actor vanished")
        return events + self._restarts_measured()

    def _restarts_measured(self) -> list[m.Event]:
        """Each restart record closed since the last poll, for the core's restart model:
        the job's next resizes are priced by what its own restarts took."""
        return [
            m.RestartMeasured(r["job_id"], dict(r["phases"]))
            for r in self.phases.take_for_core()
            if r.get("phases")
        ]

    def _ended(
        self, r: RunRecord, outcome: str, steps: float, message: str, rec: Any = None
    ) -> list[m.Event]:
        """A run ended: report it, or start the queued next generation (``rec``: its
        control record, whose timestamps close a resize's phases)."""
        jid = r.job_id
        self.kill(r)
        del self.runs[jid]
        self.dirty = True
        if outcome == "completed":
            self.phases.forget(jid)
            runs.end_job(jid)
            return [m.JobCompleted(jid, steps)]
        if r.phase == "stopping":
            self.phases.stopped(jid, rec, r.next_assignment is not None, time.time())
            if r.next_assignment is not None:
                self.start(jid, r.next_assignment)
                return [m.JobProgress(jid, steps)]
            if r.executor == "warm":
                runs.release(jid)  # slots kept for a next generation that is not coming
            return [m.JobStopped(jid, steps)]
        alive = set(self.inventory.nodes)
        if any(n not in alive for n, _ in r.assignment["nodes"]):
            return []  # its node is gone: the NodeDown already re-queued the job
        gone = [n for n, _ in r.assignment["nodes"] if self.inventory.raylet_gone(n)]
        if gone:
            # Its node's raylet is dead but Ray has not declared the node so yet. Whatever
            # the run's end says (a worker's collective call raising counts as "failed"),
            # it is the node's: a restart in place would fail there and count against the
            # retry limit, and "failed" would end the job. The node leaves the view now
            # and its NodeDown (the next poll's, as if Ray's) re-queues the job and drops
            # the node's other runs (see Inventory.raylet_gone and Inventory.condemn).
            log.warning("run %s g%d ended (%s) on a node whose raylet is gone: its node "
                        "is down", jid, r.generation, outcome)  # fmt: skip
            self._pending += [m.NodeDown(n) for n in gone if self.inventory.condemn(n)]
            return []
        if outcome == "failed":  # the job's own code raised: a rerun would raise again
            runs.end_job(jid)
            return [m.JobFailed(jid, message or outcome)]
        if r.unexpected_ends + 1 > self.max_restarts:
            runs.end_job(jid)
            return [
                m.JobFailed(
                    jid,
                    f"run {outcome} {r.unexpected_ends + 1} times, retry limit "
                    f"{self.max_restarts} restarts from checkpoint; last: {message or outcome}",
                )
            ]
        log.warning("run %s g%d ended unexpectedly (%s): restarting it", jid, r.generation, outcome)
        self.start(jid, r.assignment, unexpected=r.unexpected_ends + 1)
        return [m.JobProgress(jid, steps)] if steps else []

    # ------------------------------------------------------------------ restart

    def reconcile(self, desired: Mapping[str, m.Assignment]) -> None:
        """After a restart: make the runs match what the core believes
        (:func:`lyra_ray.runtime.reconcile.reconcile`; no new decisions). A node that
        left meanwhile is reported as NodeDown by the next poll."""
        self._pending += self.inventory.refresh()
        reconcile.reconcile(self, desired)
