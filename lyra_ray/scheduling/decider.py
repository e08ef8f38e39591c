"""The decider: steps 2-7 of the cycle over a :class:`~lyra_ray.scheduling.state.CoreState`.

It owns the policy, Gavel's rounds, the placer and its own memory: the last allocation
(it stays in force until the next solve), whether that answer is stale, whether the
current jobs still need a real placement. It reads the state and writes back only what
a decision changes there (jobs' assignments, loans, the round clock), through the
state's methods and the jobs' own records.

The round clock: a round starts when the first job arrives at a cluster that runs no
rounds, and then every ``round_s`` while the allocation has time fractions and jobs are
active; :attr:`~lyra_ray.model.Decision.next_wakeup` tells the driver when. So a job
that arrives at an idle cluster starts at once, in simulation and live alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, Decision, JobId, NodeId
from lyra_ray.model.state import allocation_from_dict, allocation_to_dict
from lyra_ray.placement.placer import ConsolidatingPlacer
from lyra_ray.policies.base import Policy
from lyra_ray.scheduling.backfill import idle_gpus_wanted
from lyra_ray.scheduling.diff import job_actions
from lyra_ray.scheduling.interfaces import Placer, RoundMechanismLike, default_rounds
from lyra_ray.scheduling.state import CoreState, Folded
from lyra_ray.scheduling.waiting import WaitReason, wait_reasons


class Decider:
    def __init__(
        self,
        policy: Policy,
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
        ``backfill`` hands GPUs idle mid-round to waiting jobs at once, preempting nobody
        (:mod:`lyra_ray.scheduling.backfill`); off as in Gavel, on live.
        """
        self.policy = policy
        self.round_s = round_s
        self._rounds = rounds
        self.min_lease_s = min_lease_s
        self.startup_grace_s = startup_grace_s
        self.placer: Placer = placer if placer is not None else ConsolidatingPlacer()
        self.backfill = backfill
        self.allocation = m.Allocation()
        self.stale = True
        """Something the policy reads changed since its last answer."""
        self.must_place = True
        """Set until a full cycle has placed the current jobs on the current nodes (see
        :meth:`holds_mid_round`): node changes and restored state need a real placement."""
        self.cycles = 0
        self.dropped_policy_state: str | None = None
        """Set by :meth:`load_state` when the saved state was another policy's: that
        policy's name (its state, rounds and allocation were dropped; the jobs kept)."""

    @property
    def rounds(self) -> RoundMechanismLike:
        if self._rounds is None:
            self._rounds = default_rounds(self.policy)
        return self._rounds

    def decide(self, state: CoreState, folded: Folded) -> Decision:
        """Steps 2-7 over the folded state, and when the core wants to be stepped next."""
        self.stale = self.stale or folded.changed
        self.must_place = self.must_place or folded.nodes_changed
        tick = folded.tick
        backfill = (
            self.backfill
            and not tick
            and state.next_round_s is not None
            and folded.may_start_early
            and self._idle_gpus_wanted(state, any_type=folded.nodes_changed)
        )
        actions = list(folded.finishes) + self._cycle(state, tick, backfill, folded.nodes_changed)
        if tick:
            state.set_next_round(None)
        if state.next_round_s is None and self.allocation.fractions and state.active_jobs():
            state.set_next_round(state.now + self.round_s)
        return Decision(tuple(actions), state.next_round_s)

    def _idle_gpus_wanted(
        self, state: CoreState, covered_only: bool = False, any_type: bool = False
    ) -> bool:
        """Whether a waiting job could start on idle GPUs; ``covered_only``: a job the
        allocation in force covers (backfill then needs no new solve). ``any_type``: a
        node came or went, so the allocation in force was planned for another cluster
        (a type that just joined is in nobody's row): every waiting job counts with every
        type it can run on."""
        active = state.active_jobs()
        running = [j.current for j in active if j.current is not None]
        fr = {} if any_type else self.allocation.fractions
        waiting = [
            (j.id, j.spec.min_workers)
            for j in active
            if j.current is None and (not covered_only or j.id in fr)
        ]
        return bool(waiting) and idle_gpus_wanted(
            state.nodes,
            state.lent,
            running,
            waiting,
            fr,
            state.usable_types,
        )

    def _cycle(
        self, state: CoreState, tick: bool, backfill: bool, nodes_changed: bool = False
    ) -> list[m.Action]:
        """Steps 2-7, or nothing where they provably would change nothing.

        Two cases skip them: nothing the policy reads changed and no round boundary was
        reached (the last answer stands), and mid-round under a settled time-fraction
        allocation (:meth:`holds_mid_round`). A third skips only the solve: a
        time-fraction answer the round mechanism would not adopt yet
        (:meth:`_defer_policy`). Each is checked against the plain path by
        ``tests/unit/test_fast_paths.py``.
        """
        rounds = tick or backfill
        if not self.stale and not (rounds and self.allocation.fractions):
            return []
        if not rounds and self.holds_mid_round(state):
            self.cycles += 1
            return []
        snap = state.snapshot(self.round_s)
        # Backfill adopts a new allocation only when no job the one in force covers can
        # take the idle GPUs (an arrival can): with 10,000 queued jobs a solve takes
        # over a second, and completions that free GPUs come every few cycles. A node
        # that came or went is rare and changes what the policy would answer (a type
        # that joined is in nobody's row): then the new answer is solved and adopted
        # (the round mechanism resets on a new capacity), running jobs pinned as ever.
        adopt = tick or (
            backfill and (nodes_changed or not self._idle_gpus_wanted(state, covered_only=True))
        )
        if self.stale and not self._defer_policy(snap, adopt):
            self.allocation = self.policy.allocate(snap)
            self.stale = False
        previous = {j.id: j.current for j in state.active_jobs() if j.current is not None}
        lend = self.allocation.lend & state.nodes_info()[1] if self.allocation.lend else frozenset()
        if lend != state.lent:
            snap = dataclasses.replace(snap, lent_nodes=frozenset(lend))
        desired = self._desired(state, snap, previous, tick, backfill, adopt)
        if lend == state.lent and self.keeps_placement(desired, previous):
            actions: list[m.Action] = []
        else:
            placed = self.placer.place(desired, snap, previous, self.allocation.preferred_nodes)
            actions = self._diff(state, placed, previous, set(lend))
        self.must_place = False
        self.cycles += 1
        return actions

    def holds_mid_round(self, state: CoreState) -> bool:
        """Whether a cycle that reaches no round boundary would change nothing but bookkeeping.

        Mid-round, a pure time-fraction allocation (no integral workers, no loans) defers
        the policy to the next round boundary and keeps every running job where it is, so
        the full cycle (snapshot, placement, diff) would emit no action: arrivals and
        completions between round boundaries, a large share of a round-based run's steps,
        skip it.
        Space-sharing pairs, loans, node changes and the minimum lease take the full cycle.
        The loop also uses this to hold back progress reports nobody would read.
        """
        alloc = self.allocation
        if (
            self.must_place
            or not alloc.fractions
            or alloc.workers
            or alloc.lend
            or state.lent
            or self.min_lease_s > 0
        ):
            return False
        for j in state.active_jobs():
            a = j.current
            if a is not None and (a.partner is not None or not a.nodes):
                return False
        return True

    def keeps_placement(
        self, desired: dict[JobId, Assignment], previous: dict[JobId, Assignment]
    ) -> bool:
        """Whether placing ``desired`` would hand every job back its running assignment.

        Most round boundaries change no one's GPUs (the round mechanism extends the
        lease of every running job by returning its very ``Assignment``), so placement
        and diff would emit nothing. The consolidating placer keeps an unchanged job
        whose nodes still fit; they do, since the same jobs held them on the same nodes
        (``must_place`` is clear: no node came or went) with the same loans (the caller
        checks). Pairs, mixed types, partial gangs and other placers take the full path.
        Checked against it by ``tests/unit/test_fast_paths.py``.
        """
        if self.must_place or type(self.placer) is not ConsolidatingPlacer:
            return False
        if len(desired) != len(previous):
            return False
        for j, a in desired.items():
            if previous.get(j) is not a or a.partner is not None or a.extra:
                return False
            nodes = a.nodes
            if len(nodes) == 1:
                if nodes[0][1] != a.workers:
                    return False
            elif not nodes or sum(g for _, g in nodes) != a.workers:
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

    def wait_reasons(self, state: CoreState) -> dict[JobId, WaitReason]:
        """Why each job that holds no GPUs waits (:mod:`lyra_ray.scheduling.waiting`): the
        policy's reasons, those its answer carries and those it derives when asked."""
        snap = state.snapshot(self.round_s)
        alloc = self.allocation
        asked = self.policy.waiting(snap, alloc)
        if asked:
            alloc = dataclasses.replace(alloc, waiting={**asked, **alloc.waiting})
        return wait_reasons(snap, alloc, state.next_round_s)

    # ------------------------------------------------------------------ 5. rounds

    def _desired(
        self,
        state: CoreState,
        snap: ClusterSnapshot,
        previous: dict[JobId, Assignment],
        tick: bool,
        backfill: bool,
        adopt: bool,
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
                    pinned = {
                        j: a for j, a in previous.items() if j in active and self._leased(state, j)
                    }
                else:
                    pinned = {}
                out.update(self.rounds.assign(snap, alloc, previous, pinned or None, adopt=adopt))
            else:  # mid-round: keep this round's assignment for jobs still running
                for j, a in previous.items():
                    if j not in out and j in active:
                        out[j] = Assignment(a.gpu_type, a.workers, partner=a.partner)
        return out

    def _leased(self, state: CoreState, job_id: JobId) -> bool:
        """Whether the job is still inside its minimum lease (see ``__init__``)."""
        if self.min_lease_s <= 0:
            return False
        j = state.jobs[job_id]
        if j.lease_from_s is not None:
            return state.now - j.lease_from_s < self.min_lease_s
        return j.launched_s is not None and state.now - j.launched_s < self.startup_grace_s

    # ------------------------------------------------------------------ 7. diff

    def _diff(
        self,
        state: CoreState,
        placed: dict[JobId, Assignment],
        previous: dict[JobId, Assignment],
        lend: set[NodeId],
    ) -> list[m.Action]:
        reclaimed = state.lent - lend
        stops, starts = job_actions(state.jobs, placed, previous, reclaimed, state.now)
        lend_actions: list[m.Action] = [m.Reclaim(n) for n in sorted(reclaimed)]
        lend_actions += [m.Lend(n) for n in sorted(lend - state.lent)]
        if lend != state.lent:
            state.set_lent(lend)
            inference = len(state.nodes_info()[1])
            lend_actions.append(m.ScaleServe(inference - len(lend)))
        resize = [a for a in stops if isinstance(a, m.Resize)]
        preempt = [a for a in stops if not isinstance(a, m.Resize)]
        return preempt + lend_actions + resize + starts

    # ------------------------------------------------------------------ persistence

    @property
    def policy_name(self) -> str:
        """Whose the policy state is: saved beside it, so that a scheduler started with
        another policy knows the saved policy state is not its own."""
        return str(getattr(self.policy, "name", "") or type(self.policy).__name__)

    def to_state(self) -> dict[str, Any]:
        """The last allocation, whether it is stale, the rounds' and the policy's state."""
        return {
            "allocation": allocation_to_dict(self.allocation),
            "dirty": self.stale,
            "rounds": self._rounds.to_state() if self._rounds is not None else None,
            "policy": self.policy.to_state(),
            "policy_name": self.policy_name,
        }

    def persisted(self) -> tuple[m.Allocation, bool, RoundMechanismLike | None]:
        """What :meth:`to_state` writes, not yet serialised: an incremental store
        serialises the allocation only when the object changed (a new solve) and the
        rounds only entry by entry."""
        return self.allocation, self.stale, self._rounds

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the decider; a state saved under another policy (another
        ``policy_name``, or, from before the name was kept, a policy state this policy
        refuses) keeps only what is not that policy's: its own state, the rounds it
        scheduled and its last allocation are dropped, and this policy starts from the
        jobs as they are (:attr:`dropped_policy_state` says whose it was)."""
        saved = state.get("policy_name")
        self.dropped_policy_state = None
        if saved is not None and saved != self.policy_name:
            self.dropped_policy_state = str(saved)
        else:
            try:
                self.policy.load_state(state.get("policy") or {})
            except (ValueError, KeyError, TypeError):
                if saved is not None:  # its own state, unreadable: not ours to drop
                    raise
                self.dropped_policy_state = "an earlier policy"
        self.must_place = self.stale = True
        if self.dropped_policy_state is not None:
            return None
        if state.get("rounds") is not None:
            self.rounds.load_state(state["rounds"])
        if "allocation" in state:  # a state written before the allocation was kept re-solves
            self.allocation = allocation_from_dict(state["allocation"])
            self.stale = bool(state["dirty"])
