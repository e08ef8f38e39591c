"""SchedulerCore: the one owner of mutable scheduling state, shared by both runtimes.

Every driver, the simulator and the live scheduler alike, runs the same short loop::

    events = runtime.poll() + arrivals           # whatever happened since the last cycle
    core.fold(now, events)                        # 1 fold events into state
    decision = core.decide()                      # 2-7 snapshot, policy, rounds, place, diff
    persist(core.to_state())                      # live: before acting (crash-safe)
    runtime.apply(decision.actions)
    wait until the next event or decision.next_wakeup

:meth:`decide` runs steps 2-7 of ARCHITECTURE.md's cycle: snapshot, policy (which also
says which inference nodes to lend), Gavel's rounds (only at a round boundary, so a
round-based policy never preempts mid-round), placement, and the diff into actions.

The core owns the round clock. A round starts when the first job arrives at a cluster
that runs no rounds, and then every ``round_s`` while the allocation has time fractions
and jobs are active; :attr:`~lyra_ray.model.Decision.next_wakeup` tells the driver when.
So a job that arrives at an idle cluster starts at once, in simulation and live alike.

Nothing here reads a clock or touches Ray: the simulator and the live runtime feed the
same events and carry out the same actions.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, Decision, JobId, NodeId
from lyra_ray.model.state import JobState
from lyra_ray.placement.placer import ConsolidatingPlacer
from lyra_ray.policies.base import Policy
from lyra_ray.scheduling import persist
from lyra_ray.scheduling.backfill import idle_gpus_wanted, may_start_early
from lyra_ray.scheduling.diff import job_actions
from lyra_ray.scheduling.folding import EventFolding
from lyra_ray.scheduling.interfaces import Placer, RoundMechanismLike, Runtime, default_rounds
from lyra_ray.scheduling.waiting import WaitReason, wait_reasons

log = logging.getLogger(__name__)

__all__ = ["Decision", "Placer", "RoundMechanismLike", "Runtime", "SchedulerCore", "default_rounds"]


class SchedulerCore(EventFolding):
    def __init__(
        self,
        policy: Policy,
        throughput_model: m.ThroughputModel,
        round_s: float = 360.0,
        rounds: RoundMechanismLike | None = None,
        min_lease_s: float = 0.0,
        startup_grace_s: float = 300.0,
        placer: Placer | None = None,
        backfill: bool = False,
    ) -> None:
        """``min_lease_s`` > 0 keeps a launched or resized job on its GPUs, across round
        boundaries, until it has made progress for that long (or, if it never reports
        progress, for ``startup_grace_s``). A live run spends tens of seconds starting
        (actors, process group, restore) before its first step; without a lease a round
        shorter than that preempts every job before it steps, and nothing finishes. The
        simulator models start-up as an overhead and leaves this at 0, as Gavel does.
        """
        self.policy = policy
        self.backfill = backfill
        """Hand GPUs idle mid-round to waiting jobs at once, preempting nobody
        (:mod:`lyra_ray.scheduling.backfill`); off as in Gavel, on live."""
        self._backfill = False
        """Set by :meth:`fold` when idle GPUs have a waiting taker; consumed by decide."""
        self.min_lease_s = min_lease_s
        self.startup_grace_s = startup_grace_s
        self.throughputs = throughput_model
        self.round_s = round_s
        self._rounds = rounds
        self.placer: Placer = placer if placer is not None else ConsolidatingPlacer()
        self.jobs: dict[JobId, JobState] = {}
        self._active: dict[JobId, JobState] = {}
        """Jobs not yet terminal, in submission order: every cycle walks only these."""
        self.nodes: dict[NodeId, m.Node] = {}
        self.lent: set[NodeId] = set()
        self.serving_demand = 0
        self.now = 0.0
        self.next_round_s: float | None = None
        """The next round boundary, or ``None`` while no rounds run (see the module doc)."""
        self.allocation = m.Allocation()
        self._dirty = True
        """Something the policy reads changed since its last answer."""
        self._must_place = True
        """Set until a full cycle has placed the current jobs on the current nodes (see
        :meth:`holds_mid_round`): node changes and restored state need a real placement."""
        self._tick = False
        """The folded events (or the time) reached a round boundary: set by :meth:`fold`,
        consumed by :meth:`decide`."""
        self._finishes: list[m.Action] = []
        """Runs of cancelled jobs to release, emitted by the next :meth:`decide`."""
        self._ended: list[JobId] = []
        """Jobs that became terminal since the last :meth:`take_terminal`."""
        self._nodes_cache: tuple[tuple[m.Node, ...], frozenset[NodeId]] | None = None
        self.reclaims = 0
        self.cycles = 0

    # ------------------------------------------------------------------ public API

    @property
    def rounds(self) -> RoundMechanismLike:
        if self._rounds is None:
            self._rounds = default_rounds(self.policy)
        return self._rounds

    def active(self) -> list[JobState]:
        return list(self._active.values())

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

    def step(self, now: float, events: Sequence[m.Event]) -> Decision:
        """:meth:`fold` then :meth:`decide`: one whole cycle."""
        self.fold(now, events)
        return self.decide()

    def round_due(self, now: float, events: Sequence[m.Event]) -> bool:
        """Whether folding ``events`` at ``now`` reaches a round boundary: the boundary
        itself, or a job arriving while no rounds run (an idle cluster starts at once)."""
        if self.next_round_s is not None:
            return now >= self.next_round_s
        return any(isinstance(e, m.JobSubmitted) for e in events)

    def fold(self, now: float, events: Sequence[m.Event]) -> None:
        """Step 1: account the time running jobs received, then fold ``events`` in."""
        if now < self.now:
            raise ValueError(f"time went backwards: {now} < {self.now}")
        tick = self.round_due(now, events)
        self._account(now)
        self.now = now
        self._fold(events)
        self._tick = self._tick or tick
        if not self._tick and self.backfill and self.next_round_s is not None:
            self._backfill = self._backfill or (
                may_start_early(events) and self._idle_gpus_wanted()
            )

    def _usable_types(self, job_id: JobId, workers: int) -> list[str]:
        spec = self.jobs[job_id].spec
        types = {n.gpu_type for n in self.nodes.values()}
        return [t for t in sorted(types) if self.throughputs.throughput(spec, t, workers) > 0]

    def _idle_gpus_wanted(self) -> bool:
        running = [j.current for j in self._active.values() if j.current is not None]
        waiting = [(j.id, j.spec.min_workers) for j in self._active.values() if j.current is None]
        return bool(waiting) and idle_gpus_wanted(
            self.nodes, self.lent, running, waiting, self.allocation.fractions, self._usable_types
        )

    def decide(self) -> Decision:
        """Steps 2-7 over the folded state, and when the core wants to be stepped next."""
        tick, self._tick = self._tick, False
        backfill, self._backfill = self._backfill and not tick, False
        actions, self._finishes = self._finishes, []
        actions += self._cycle(tick, backfill)
        if tick:
            self.next_round_s = None
        if self.next_round_s is None and self.allocation.fractions and self._active:
            self.next_round_s = self.now + self.round_s
        return Decision(tuple(actions), self.next_round_s)

    def _cycle(self, tick: bool, backfill: bool = False) -> list[m.Action]:
        """Steps 2-7, or nothing where they provably would change nothing.

        Two cases skip them: nothing the policy reads changed and no round boundary was
        reached (the last answer stands), and mid-round under a settled time-fraction
        allocation (:meth:`holds_mid_round`). A third skips only the solve: a
        time-fraction answer the round mechanism would not adopt yet
        (:meth:`_defer_policy`). Each is checked against the plain path by
        ``tests/unit/test_fast_paths.py``.
        """
        rounds = tick or backfill
        if not self._dirty and not (rounds and self.allocation.fractions):
            return []
        if not rounds and self.holds_mid_round():
            self.cycles += 1
            return []
        snap = self.snapshot()
        if self._dirty and not self._defer_policy(snap, rounds):
            self.allocation = self.policy.allocate(snap)
            self._dirty = False
        previous = {j.id: j.current for j in self._active.values() if j.current is not None}
        lend = self.allocation.lend & self.nodes_info()[1] if self.allocation.lend else frozenset()
        if lend != self.lent:
            snap = self._with_lent(snap, frozenset(lend))
        desired = self._desired(snap, previous, tick, backfill)
        placed = self.placer.place(desired, snap, previous, self.allocation.preferred_nodes)
        actions = self._diff(placed, previous, set(lend))
        self._must_place = False
        self.cycles += 1
        return actions

    def holds_mid_round(self) -> bool:
        """Whether a cycle that reaches no round boundary would change nothing but bookkeeping.

        Mid-round, a pure time-fraction allocation (no integral workers, no loans) defers
        the policy to the next round boundary and keeps every running job where it is, so
        the full cycle (snapshot, placement, diff) would emit no action: arrivals and
        completions between round boundaries, a large share of a round-based run's steps,
        skip it.
        Space-sharing pairs, loans, node changes and the minimum lease take the full cycle.
        The simulator also uses this to hold back progress reports nobody would read.
        """
        alloc = self.allocation
        if (
            self._must_place
            or not alloc.fractions
            or alloc.workers
            or alloc.lend
            or self.lent
            or self.min_lease_s > 0
        ):
            return False
        for j in self._active.values():
            a = j.current
            if a is not None and (a.partner is not None or not a.nodes):
                return False
        return True

    def _defer_policy(self, snap: ClusterSnapshot, tick: bool) -> bool:
        """Skip a solve whose answer the round mechanism would not adopt yet.

        A pure time-fraction allocation only acts through the round mechanism, which
        takes a new X only at a round boundary and (like Gavel) at most once per
        ``min_reset_interval_s``; until then the old X stays in force. Solving anyway
        would be wasted work, so the policy runs when the mechanism will adopt it.
        """
        alloc = self.allocation
        if not alloc.fractions or alloc.workers or alloc.lend:
            return False
        return not (tick and self.rounds.would_adopt(snap))

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

    def wait_reasons(self) -> dict[JobId, WaitReason]:
        """Why each job that holds no GPUs waits (:mod:`lyra_ray.scheduling.waiting`)."""
        return wait_reasons(self.snapshot(), self.allocation, self.next_round_s)

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            now=self.now,
            nodes=self.nodes_info()[0],
            jobs=tuple([j.view() for j in self._active.values()]),
            throughput_model=self.throughputs,
            round_s=self.round_s,
            serving_demand=self.serving_demand,
            lent_nodes=frozenset(self.lent),
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

    def _nodes_changed(self) -> None:
        self._nodes_cache = None
        self._must_place = True
        self._dirty = True

    # ------------------------------------------------------------------ 1. fold

    # ------------------------------------------------------------------ 5. rounds

    @staticmethod
    def _with_lent(snap: ClusterSnapshot, lent: frozenset[NodeId]) -> ClusterSnapshot:
        return dataclasses.replace(snap, lent_nodes=lent)

    def _desired(
        self,
        snap: ClusterSnapshot,
        previous: dict[JobId, Assignment],
        tick: bool,
        backfill: bool = False,
    ) -> dict[JobId, Assignment]:
        alloc = self.allocation
        active = {j.id for j in snap.jobs}
        ex = alloc.extra
        out = {
            j: Assignment(g, n, extra=ex[j]) if j in ex else Assignment(g, n)
            for j, (g, n) in alloc.workers.items()
            if j in active and n > 0
        }
        if alloc.fractions:
            if tick or backfill:
                if backfill:  # idle GPUs only: every running job stays where it is
                    pinned = {j: a for j, a in previous.items() if j in active}
                elif self.min_lease_s > 0:
                    pinned = {j: a for j, a in previous.items() if j in active and self._leased(j)}
                else:
                    pinned = {}
                out.update(self.rounds.assign(snap, alloc, previous, pinned or None))
            else:  # mid-round: keep this round's assignment for jobs still running
                for j, a in previous.items():
                    if j not in out and j in active:
                        out[j] = Assignment(a.gpu_type, a.workers, partner=a.partner)
        return out

    def _leased(self, job_id: JobId) -> bool:
        """Whether the job is still inside its minimum lease (see ``__init__``)."""
        if self.min_lease_s <= 0:
            return False
        j = self.jobs[job_id]
        if j.lease_from_s is not None:
            return self.now - j.lease_from_s < self.min_lease_s
        return j.launched_s is not None and self.now - j.launched_s < self.startup_grace_s

    # ------------------------------------------------------------------ 7. diff

    def _diff(
        self, placed: dict[JobId, Assignment], previous: dict[JobId, Assignment], lend: set[NodeId]
    ) -> list[m.Action]:
        reclaimed = self.lent - lend
        stops, starts = job_actions(self.jobs, placed, previous, reclaimed, self.now)
        lend_actions: list[m.Action] = [m.Reclaim(n) for n in sorted(reclaimed)]
        lend_actions += [m.Lend(n) for n in sorted(lend - self.lent)]
        if lend != self.lent:
            self.reclaims += len(reclaimed)
            inference = len(self.nodes_info()[1])
            self.lent = lend
            lend_actions.append(m.ScaleServe(inference - len(lend)))
        resize = [a for a in stops if isinstance(a, m.Resize)]
        preempt = [a for a in stops if not isinstance(a, m.Resize)]
        return preempt + lend_actions + resize + starts

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """Everything needed to resume: JSON-safe, deterministic key order."""
        return persist.core_to_state(self)

    def load_state(self, state: dict[str, Any]) -> None:
        persist.core_load_state(self, state)
