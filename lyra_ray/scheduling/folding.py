"""Step 1 of the cycle: folding events into the core's state (``SchedulerCore.fold``).

A mixin of :class:`lyra_ray.scheduling.core.SchedulerCore`, kept apart because it is one
concept — what each event means for jobs, nodes, serving demand and the throughput
model — while the core's own file is the decision (steps 2-7). It owns no state: the
attributes below are the core's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lyra_ray import model as m
from lyra_ray.model import JobId, JobStatus, NodeId, ThroughputModel
from lyra_ray.model.state import JobState

log = logging.getLogger("lyra_ray.scheduling.core")


class EventFolding:
    now: float
    jobs: dict[JobId, JobState]
    _active: dict[JobId, JobState]
    nodes: dict[NodeId, m.Node]
    lent: set[NodeId]
    serving_demand: int
    throughputs: ThroughputModel
    _dirty: bool
    _finishes: list[m.Action]
    _ended: list[JobId]

    def active(self) -> list[JobState]:
        raise NotImplementedError

    def _nodes_changed(self) -> None:
        raise NotImplementedError

    def _account(self, now: float) -> None:
        dt = now - self.now
        if dt <= 0:
            return
        for j in self._active.values():
            a = j.current
            if a is None or j.status is not JobStatus.RUNNING:
                continue
            j.attained_service_s += dt * a.workers
            j.time_received_s[a.gpu_type] = j.time_received_s.get(a.gpu_type, 0.0) + dt

    def _fold(self, events: Sequence[m.Event]) -> None:
        for ev in events:
            if isinstance(ev, m.JobsProgress):
                for jid, steps in ev.steps_done.items():
                    self._progress(jid, steps)
            elif isinstance(ev, m.JobProgress):
                j = self._progress(ev.job_id, ev.steps_done)
                if j is not None and ev.steps_per_s is not None:
                    self._observe(j, ev.steps_per_s)
            elif isinstance(ev, m.JobSubmitted):
                if ev.job_id in self.jobs:
                    raise ValueError(f"job id {ev.job_id!r} submitted twice")
                j = JobState(ev.job_id, ev.spec, arrival_s=self.now)
                j.throughput = self._throughput_row(j)
                self.jobs[ev.job_id] = j
                self._active[ev.job_id] = j
                self._dirty = True
            elif isinstance(ev, m.JobCompleted):
                self._end(ev.job_id, JobStatus.FINISHED, ev.steps_done)
            elif isinstance(ev, m.JobFailed):
                log.warning("job %s failed: %s", ev.job_id, ev.reason)
                self._end(ev.job_id, JobStatus.FAILED, None)
            elif isinstance(ev, m.JobCancelled):
                j = self.jobs.get(ev.job_id)
                if j is not None and not j.status.terminal:
                    if j.current is not None:
                        self._finishes.append(m.Finish(ev.job_id))
                    self._end(ev.job_id, JobStatus.CANCELLED, None)
            elif isinstance(ev, m.JobStopped):
                j = self.jobs.get(ev.job_id)
                if j is not None:
                    j.steps_done = min(j.spec.total_steps, max(j.steps_done, ev.steps_done))
            elif isinstance(ev, m.NodeUp):
                known = {n.gpu_type for n in self.nodes.values()}
                self.nodes[ev.node.id] = ev.node
                if ev.node.gpu_type not in known:
                    for j in self.active():
                        j.throughput = self._throughput_row(j)
                self._nodes_changed()
            elif isinstance(ev, m.NodeDown):
                self._node_down(ev.node_id)
            elif isinstance(ev, m.ServingDemand) and ev.servers != self.serving_demand:
                self.serving_demand = ev.servers
                self._dirty = True

    def _progress(self, job_id: JobId, steps: float) -> JobState | None:
        """Fold an absolute step count (monotone, capped at the total) into a job not yet
        terminal; its minimum lease starts at its first step past launch."""
        j = self._active.get(job_id)
        if j is None:
            return None
        if steps > j.steps_done:
            total = j.spec.total_steps
            j.steps_done = steps if steps < total else total
        if j.lease_from_s is None and j.steps_done > j.launch_steps:
            j.lease_from_s = self.now
        return j

    def _observe(self, j: JobState, steps_per_s: float | None) -> None:
        if steps_per_s is None or j.current is None or j.current.extra:
            return  # a mixed-type run's rate is no (GPU type, workers) measurement
        partner = self.jobs.get(j.current.partner) if j.current.partner else None
        if partner is not None:  # a shared GPU's rate belongs to the pair, not the job
            self.throughputs.observe_pair(j.spec, partner.spec, j.current.gpu_type, steps_per_s)
            return
        self.throughputs.observe(j.spec, j.current.gpu_type, j.current.workers, steps_per_s)
        j.throughput = self._throughput_row(j)

    def _throughput_row(self, j: JobState) -> dict[str, float]:
        types = sorted({n.gpu_type for n in self.nodes.values()})
        return {g: self.throughputs.throughput(j.spec, g, j.spec.min_workers) for g in types}

    def _end(self, job_id: JobId, status: JobStatus, steps: float | None) -> None:
        j = self.jobs.get(job_id)
        if j is None or j.status.terminal:
            return
        if steps is not None:
            j.steps_done = min(j.spec.total_steps, steps)
        j.status, j.finish_s, j.current = status, self.now, None
        self._active.pop(job_id, None)
        self._ended.append(job_id)
        self._dirty = True

    def _node_down(self, node_id: NodeId) -> None:
        if self.nodes.pop(node_id, None) is None:
            return
        self.lent.discard(node_id)
        for j in self.active():
            if j.current is not None and any(n == node_id for n, _ in j.current.nodes):
                # Its runtime lost the workers on that node: the job resumes elsewhere.
                j.current, j.status = None, JobStatus.PREEMPTED
                j.num_preemptions += 1
        self._nodes_changed()
