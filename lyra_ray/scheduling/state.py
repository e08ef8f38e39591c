"""The core's state: jobs, nodes, loans, serving demand and the round clock, and what
each event means for them.

One owner for everything a decision reads and a restart needs, apart from the decider's
own memory (its last allocation, rounds, policy state: :mod:`lyra_ray.scheduling.decider`).
:meth:`CoreState.fold` is step 1 of the cycle; it returns a :class:`Folded`, the typed
account of what changed that the decider takes, so nothing travels from fold to decide
through flags left on an object.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, ValuesView
from dataclasses import dataclass
from typing import Any

from lyra_ray import model as m
from lyra_ray.model import ClusterSnapshot, JobId, JobStatus, NodeId, ThroughputModel
from lyra_ray.model.restart_cost import RestartModel
from lyra_ray.model.state import JobState, job_from_dict, job_to_dict
from lyra_ray.scheduling.backfill import may_start_early

log = logging.getLogger("lyra_ray.scheduling.core")


@dataclass(frozen=True)
class Folded:
    """What one fold did, for the decision that follows it."""

    now: float
    tick: bool
    """A round boundary was reached (or a job arrived while no rounds run)."""
    changed: bool
    """Something the policy reads changed: its last answer may be stale."""
    nodes_changed: bool
    """A node came or went: the current jobs need a real placement."""
    may_start_early: bool
    """An event that can free GPUs or bring a taker (for mid-round backfill)."""
    finishes: tuple[m.Action, ...] = ()
    """Runs of cancelled jobs to release."""


class CoreState:
    def __init__(self, throughputs: ThroughputModel, restarts: RestartModel | None = None) -> None:
        self.throughputs = throughputs
        """Learns from progress reports (a job's measured rate), so it is state too."""
        self.restarts = restarts if restarts is not None else RestartModel()
        """Prices each job's restart; learns from the live runtime's restart records."""
        self.jobs: dict[JobId, JobState] = {}
        self._active: dict[JobId, JobState] = {}
        """Jobs not yet terminal, in submission order: every cycle walks only these."""
        self.nodes: dict[NodeId, m.Node] = {}
        self.lent: set[NodeId] = set()
        self.serving_demand = 0
        self.now = 0.0
        self.next_round_s: float | None = None
        """The next round boundary, or ``None`` while no rounds run."""
        self.reclaims = 0
        self._ended: list[JobId] = []
        """Jobs that became terminal since the last :meth:`take_terminal`."""
        self._nodes_cache: tuple[tuple[m.Node, ...], frozenset[NodeId]] | None = None

    # ------------------------------------------------------------------ reading

    def active(self) -> list[JobState]:
        return list(self._active.values())

    def active_jobs(self) -> ValuesView[JobState]:
        """The live jobs without a copy (read only: for the decider's inner loops, which
        run every step of a replay)."""
        return self._active.values()

    def round_due(self, now: float, events: Sequence[m.Event]) -> bool:
        """Whether folding ``events`` at ``now`` reaches a round boundary: the boundary
        itself, or, while no rounds run, a job arriving (an idle cluster starts at once)
        or a node joining while jobs wait.

        WHY the node: rounds stop while the policy gives nobody time on a GPU (jobs
        queued on a cluster without a type they can use). A node that joins then, e.g.
        one the autoscaler started for them, must start the rounds at once; otherwise
        the first round is planned a whole ``round_s`` after it, and the jobs wait that
        long beside idle GPUs (mid-round backfill cannot help: it needs a round in force).
        """
        if self.next_round_s is not None:
            return now >= self.next_round_s
        return any(
            isinstance(e, m.JobSubmitted) or (isinstance(e, m.NodeUp) and self._active)
            for e in events
        )

    def nodes_info(self) -> tuple[tuple[m.Node, ...], frozenset[NodeId]]:
        """(nodes sorted by id, inference node ids), rebuilt only when a node comes or goes.

        The same tuple object goes into every snapshot, so consumers may cache on it.
        """
        if self._nodes_cache is None:
            nodes = tuple(self.nodes[k] for k in sorted(self.nodes))
            inference = frozenset(n.id for n in nodes if n.pool == "inference")
            self._nodes_cache = (nodes, inference)
        return self._nodes_cache

    def snapshot(self, round_s: float) -> ClusterSnapshot:
        return ClusterSnapshot(
            now=self.now,
            nodes=self.nodes_info()[0],
            jobs=tuple([j.view() for j in self._active.values()]),
            throughput_model=self.throughputs,
            round_s=round_s,
            serving_demand=self.serving_demand,
            lent_nodes=frozenset(self.lent),
            restart_model=self.restarts,
        )

    def busy_gpus(self) -> dict[NodeId, int]:
        """GPUs running training on each node, a space-sharing pair's GPUs counted once:
        the one count the simulator's samples and the live metrics both read."""
        busy: dict[NodeId, int] = {}
        seen: set[tuple[NodeId, str]] = set()
        for j in self._active.values():
            a = j.current
            if a is None:
                continue
            for node, g in a.nodes:
                if a.partner is not None:
                    key = (node, "+".join(sorted((j.id, a.partner))))
                    if key in seen:
                        continue
                    seen.add(key)
                busy[node] = busy.get(node, 0) + g
        return busy

    def usable_types(self, job_id: JobId, workers: int) -> list[str]:
        spec = self.jobs[job_id].spec
        types = {n.gpu_type for n in self.nodes.values()}
        return [t for t in sorted(types) if self.throughputs.throughput(spec, t, workers) > 0]

    # ------------------------------------------------------------------ what decisions change

    def set_next_round(self, at: float | None) -> None:
        self.next_round_s = at

    def set_lent(self, lent: set[NodeId]) -> int:
        """The decider's loans; returns how many servers came back (reclaims)."""
        back = len(self.lent - lent)
        self.reclaims += back
        self.lent = lent
        return back

    def take_terminal(self) -> list[JobState]:
        """Hand out, and forget, the jobs that ended since the last call.

        :meth:`to_state` is written every cycle; without this it carries every job ever
        seen. A terminal job plays no part in any decision, so dropping it changes none
        (``tests/sim/test_archive_decides_alike.py``). The live scheduler archives them in
        the same transaction; the simulator never calls this (its report reads them all).
        """
        out = [self.jobs.pop(k) for k in self._ended if k in self.jobs]
        self._ended = []
        return out

    # ------------------------------------------------------------------ 1. fold

    def fold(self, now: float, events: Sequence[m.Event]) -> Folded:
        """Account the time running jobs received up to ``now``, then fold ``events``."""
        if now < self.now:
            raise ValueError(f"time went backwards: {now} < {self.now}")
        tick = self.round_due(now, events)
        self._account(now)
        self.now = now
        changed = nodes_changed = False
        finishes: list[m.Action] = []
        for ev in events:
            if isinstance(ev, m.JobsProgress):
                self._progress_all(ev.steps_done)
            elif isinstance(ev, m.JobProgress):
                j = self.progress(ev.job_id, ev.steps_done)
                if j is not None and ev.steps_per_s is not None:
                    self._observe(j, ev.steps_per_s)
            elif isinstance(ev, m.JobSubmitted):
                if ev.job_id in self.jobs:
                    raise ValueError(f"job id {ev.job_id!r} submitted twice")
                self.add_job(JobState(ev.job_id, ev.spec, arrival_s=self.now))
                changed = True
            elif isinstance(ev, m.JobCompleted):
                changed |= self.end_job(ev.job_id, JobStatus.FINISHED, ev.steps_done)
            elif isinstance(ev, m.JobFailed):
                log.warning("job %s failed: %s", ev.job_id, ev.reason)
                changed |= self.end_job(ev.job_id, JobStatus.FAILED, None)
            elif isinstance(ev, m.JobCancelled):
                j = self.jobs.get(ev.job_id)
                if j is not None and not j.status.terminal:
                    if j.current is not None:
                        finishes.append(m.Finish(ev.job_id))
                    changed |= self.end_job(ev.job_id, JobStatus.CANCELLED, None)
            elif isinstance(ev, m.JobStopped):
                j = self.jobs.get(ev.job_id)
                if j is not None:
                    j.steps_done = min(j.spec.total_steps, max(j.steps_done, ev.steps_done))
            elif isinstance(ev, m.RestartMeasured):
                if ev.job_id in self._active:
                    self.restarts.observe(ev.job_id, ev.phases)
            elif isinstance(ev, m.NodeUp):
                self.node_up(ev.node)
                changed = nodes_changed = True
            elif isinstance(ev, m.NodeDown):
                if self.node_down(ev.node_id):
                    changed = nodes_changed = True
            elif isinstance(ev, m.ServingDemand) and ev.servers != self.serving_demand:
                self.serving_demand = ev.servers
                changed = True
        return Folded(now, tick, changed, nodes_changed, may_start_early(events), tuple(finishes))

    def _observe(self, j: JobState, steps_per_s: float) -> None:
        if j.current is None or j.current.extra:
            return  # a mixed-type run's rate is no (GPU type, workers) measurement
        partner = self.jobs.get(j.current.partner) if j.current.partner else None
        if partner is not None:  # a shared GPU's rate belongs to the pair, not the job
            self.throughputs.observe_pair(j.spec, partner.spec, j.current.gpu_type, steps_per_s)
            return
        self.throughputs.observe(j.spec, j.current.gpu_type, j.current.workers, steps_per_s)
        j.throughput = self.throughput_row(j)

    def _account(self, now: float) -> None:
        dt = now - self.now
        if dt <= 0:
            return
        running = JobStatus.RUNNING
        for j in self._active.values():
            a = j.current
            if a is None or j.status is not running:
                continue
            j.attained_service_s += dt * a.workers
            got = j.time_received_s
            gt = a.gpu_type
            got[gt] = got.get(gt, 0.0) + dt

    def throughput_row(self, j: JobState) -> dict[str, float]:
        types = sorted({n.gpu_type for n in self.nodes.values()})
        return {g: self.throughputs.throughput(j.spec, g, j.spec.min_workers) for g in types}

    def add_job(self, j: JobState) -> None:
        j.throughput = self.throughput_row(j)
        self.jobs[j.id] = j
        self._active[j.id] = j

    def end_job(self, job_id: JobId, status: JobStatus, steps: float | None) -> bool:
        j = self.jobs.get(job_id)
        if j is None or j.status.terminal:
            return False
        if steps is not None:
            j.steps_done = min(j.spec.total_steps, steps)
        j.status, j.finish_s, j.current = status, self.now, None
        self._active.pop(job_id, None)
        self.restarts.forget(job_id)
        self._ended.append(job_id)
        return True

    def node_up(self, node: m.Node) -> None:
        known = {n.gpu_type for n in self.nodes.values()}
        self.nodes[node.id] = node
        if node.gpu_type not in known:
            for j in self.active():
                j.throughput = self.throughput_row(j)
        self._nodes_cache = None

    def node_down(self, node_id: NodeId) -> bool:
        if self.nodes.pop(node_id, None) is None:
            return False
        self.lent.discard(node_id)
        for j in self.active():
            if j.current is not None and any(n == node_id for n, _ in j.current.nodes):
                # Its runtime lost the workers on that node: the job resumes elsewhere.
                j.current, j.status = None, JobStatus.PREEMPTED
                j.num_preemptions += 1
        self._nodes_cache = None
        return True

    def _progress_all(self, steps_done: Mapping[JobId, float]) -> None:
        """:meth:`progress` for every job of a batched report, in one loop: a replay
        folds one per running job at every round boundary, and a call each cost more
        than the work."""
        active, now = self._active, self.now
        for jid, steps in steps_done.items():
            j = active.get(jid)
            if j is None:
                continue
            if steps > j.steps_done:
                total = j.spec.total_steps
                j.steps_done = steps if steps < total else total
            if j.lease_from_s is None and j.steps_done > j.launch_steps:
                j.lease_from_s = now

    def progress(self, job_id: JobId, steps: float) -> JobState | None:
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

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """JSON-safe, deterministic key order."""
        return {
            "jobs": [job_to_dict(self.jobs[k]) for k in sorted(self.jobs)],
            "nodes": self.nodes_to_state(),
            **self.scalars_to_state(),
        }

    def nodes_to_state(self) -> list[dict[str, Any]]:
        """The nodes part of :meth:`to_state`: an incremental store writes it only when
        :meth:`nodes_info` was rebuilt (a node came or went)."""
        return [
            {"id": n.id, "gpu_type": n.gpu_type, "num_gpus": n.num_gpus, "pool": n.pool}
            for n in self.nodes_info()[0]
        ]

    def scalars_to_state(self) -> dict[str, Any]:
        """The small part of :meth:`to_state` (clock, loans, demand): cheap every cycle."""
        return {
            "now": self.now,
            "lent": sorted(self.lent),
            "serving_demand": self.serving_demand,
            "reclaims": self.reclaims,
            "next_round_s": self.next_round_s,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.now = float(state["now"])
        self.jobs = {d["id"]: job_from_dict(d) for d in state["jobs"]}
        self._active = {k: j for k, j in self.jobs.items() if not j.status.terminal}
        # A state written before terminal jobs were handed out (or between two hand-outs)
        # still holds some: the next take_terminal() hands them out.
        self._ended = [k for k, j in self.jobs.items() if j.status.terminal]
        self.nodes = {d["id"]: m.Node(**d) for d in state["nodes"]}
        self.lent = set(state["lent"])
        self.serving_demand = int(state["serving_demand"])
        self.reclaims = int(state.get("reclaims", 0))
        nr = state.get("next_round_s")
        self.next_round_s = None if nr is None else float(nr)
        self._nodes_cache = None

    def refresh_throughput_rows(self) -> None:
        """After the throughput model was restored: every job's row from it."""
        for j in self.jobs.values():
            j.throughput = self.throughput_row(j)
