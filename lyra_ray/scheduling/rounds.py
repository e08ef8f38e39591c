"""Gavel's round mechanism: turn time fractions X into this round's GPU assignment.

A policy says *what fraction of time* each job (or job pair) should spend on each GPU
type; a round says *who runs now*. Gavel (``scheduler.py``: ``_update_priorities``,
``_reset_time_run_so_far``, ``_schedule_jobs_on_workers_helper``) does it like this, and
so does this module (docs/gavel.md lists every rule):

1. Bookkeeping. Per (job or pair, GPU type) the time it ran since the last *reset*, and
   per GPU type the sum of those times. A reset happens when the set of active jobs
   changed (an arrival or a completion), or the training pool's GPUs per type changed (a
   node joined or left: Gavel's cluster is fixed, so this rule is lyra's, and without it
   an X solved before a node joined stays in force, giving the node's type to nobody,
   until the job set changes), and at least ``min_reset_interval_s`` passed
   since the last one (Gavel: ``minimum_time_between_allocation_resets``, 1920 s); only
   then is the policy's new X adopted — until then the previous X stays in force, so a
   newly arrived job has X = 0 and runs on leftover GPUs only. At a reset each entry's deficit
   grows by ``X_old * elapsed - received``, then every time counter restarts at half a
   round (so a fresh entry does not divide by zero) and the per-type total is their sum.
2. Priority on type j: ``X_mj / (time_mj / time_j)`` — the target fraction over the
   fraction received; ``X_mj * 1e9`` while nothing was received; 0 where ``X_mj == 0``
   or the job cannot run on j. Every active job is a candidate, so GPUs the allocation
   leaves idle go to priority-0 jobs (Gavel is work-conserving in the same way).
3. Greedy per GPU type, types in order (fastest first), entries sorted by (priority,
   deficit, X) descending: skip an entry whose job already runs this round or whose
   gang (scale factor GPUs) no longer fits; take it otherwise.
4. Lease extension: a job that keeps its GPU type keeps its ``Assignment`` (and nodes),
   so the runtime sees no change and does not preempt it.

Pure: no clock, no I/O; all state is in :meth:`to_state` (JSON-safe).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from lyra_ray.model import (
    PAIR_SEP,
    Allocation,
    Assignment,
    ClusterSnapshot,
    GpuType,
    JobId,
    JobView,
    split_pair,
)
from lyra_ray.scheduling import round_books as books
from lyra_ray.scheduling.round_greedy import (
    EntryRow,
    Ranker,
    Row,
    RowRanker,
    active_by_id,
    greedy,
    pair_runnable,
    rank,
)
from lyra_ray.scheduling.round_rank import EntryIndex, IndexRanker
from lyra_ray.scheduling.round_state import RoundMemo, RoundState

_EMPTY: dict[GpuType, float] = {}


@dataclass
class RoundMechanism:
    """Gavel's priority-based round mechanism; one instance per scheduler core.

    A round runs every few simulated minutes, so the per-round work is kept to a walk
    over the active entries: throughput rows, runnable types, GPU counts and the pair
    keys of the allocation are cached on the identity of their (immutable) sources.
    """

    shuffle_types: bool = False
    """Gavel shuffles the GPU-type order each round for its agnostic policies."""
    seed: int = 0
    min_reset_interval_s: float = 1920.0
    """Gavel's default; 0 adopts every new allocation at the next round."""
    skip_zero_priority: bool = False
    """Gavel's FIFO rule: never hand idle GPUs to entries the allocation gives nothing."""
    index_from: int = field(default=1000, compare=False)
    """Active jobs from which rounds rank over kept columns (:mod:`.round_rank`, the same
    answers; below it numpy costs more than it saves). A speed setting, not state."""
    state: RoundState = field(default_factory=RoundState)
    """The bookkeeping a round's answer depends on; persisted by :meth:`to_state`."""
    memo: RoundMemo = field(default_factory=RoundMemo, repr=False)
    """Speed-ups only: :meth:`RoundMemo.clear` at any moment changes no answer."""
    _thr: dict[JobId, Row] = field(default_factory=dict, repr=False)
    """This call's throughput rows, rebuilt at the start of every :meth:`assign`."""
    _shuffler: tuple[int, random.Random] | None = field(default=None, repr=False)
    """(rounds it has shuffled, Gavel's type shuffler); rebuilt from the seed and
    ``state.rounds`` whenever they disagree, so it is a memo, not state."""

    def assign(
        self,
        snap: ClusterSnapshot,
        allocation: Allocation,
        previous: Mapping[JobId, Assignment] | None = None,
        pinned: Mapping[JobId, Assignment] | None = None,
        adopt: bool = True,
    ) -> dict[JobId, Assignment]:
        """This round's assignment for the jobs ``allocation.fractions`` covers.

        ``pinned`` jobs keep their assignment whatever their priority (the core's minimum
        lease): their GPUs are taken before the greedy pass hands out the rest. Without
        ``adopt`` (mid-round backfill) the allocation in force stays in force even if the
        job set changed: jobs it does not cover yet take idle GPUs as unallocated ones,
        and the next round boundary adopts the new answer.
        """
        prev = previous or {}
        active = self._active(snap)
        gpus = self._gpus(snap)
        self._thr = self.memo.throughput_rows(snap, active, gpus)
        books.credit(self.state, self.memo, active, prev)
        if adopt and self._would_adopt(snap.now, active, self._capacity(snap)):
            books.reset(self.state, self.memo, snap.now, active, allocation, snap.round_s / 2.0)
            self.state.capacity = dict(self._capacity(snap))
        wt, skip_zero = self.state.worker_time, self.skip_zero_priority
        ref = self.state.alloc_ref
        unallocated = active.keys() - ref.keys() if ref else frozenset()
        ranker: Ranker
        if len(active) >= self.index_from:
            index = self._index(snap, active, gpus)
            order = self._type_order(gpus, index.type_order(gpus))
            ranker = IndexRanker(index, wt, skip_zero)
        else:
            self.memo.index = None  # its credits would go unrecorded
            order = self._type_order(gpus)
            rows = self._entry_rows(snap, active)
            # ``rows`` are the active jobs, then pairs: no pair iff one row per active job.
            ranker = RowRanker(rows, wt, skip_zero, active, len(rows) == len(active))
        out = greedy(order, ranker, active, gpus, prev, pinned or {}, unallocated)
        self.state.rounds += 1
        return out

    def _index(
        self, snap: ClusterSnapshot, active: Mapping[JobId, JobView], gpus: Mapping[GpuType, int]
    ) -> EntryIndex:
        """The memo's :class:`EntryIndex`, brought up to date with this call's entries."""
        index, types = self.memo.index, list(gpus)
        if index is None or index.types != types:
            index = self.memo.index = EntryIndex(types)
        st, keys = self.state, self._candidates(active)
        pairs = lambda key: self._runnable_types(snap, key, active)  # noqa: E731
        index.sync(
            keys, len(active), self._thr, active, pairs, (st.alloc_ref, st.job_time, st.deficits)
        )
        return index

    @property
    def rounds_done(self) -> int:
        return self.state.rounds

    def would_adopt(self, snap: ClusterSnapshot) -> bool:
        """Whether a round now would take a new allocation (else the old X stays).

        The core asks this to skip solving a policy whose answer would be ignored.
        """
        return self._would_adopt(snap.now, self._active(snap), self._capacity(snap))

    def _would_adopt(
        self,
        now: float,
        active: Mapping[JobId, JobView] | tuple[JobView, ...],
        capacity: Mapping[GpuType, int],
    ) -> bool:
        last = self.state.last_reset
        # Gavel tests ``last_reset_time == 0`` as "never reset", so a reset at t = 0 does
        # not start the interval: the next change is adopted at once.
        if last is not None and last != 0.0 and now - last < self.min_reset_interval_s:
            return False
        if self.state.capacity is not None and self.state.capacity != capacity:
            return True
        job_set = self.state.job_set
        if len(active) != len(job_set):  # another job count: another set (ids are unique)
            return True
        ids = active if isinstance(active, Mapping) else (j.id for j in active)
        return sorted(ids) != job_set

    def _active(self, snap: ClusterSnapshot) -> dict[JobId, JobView]:
        """:func:`active_by_id`, kept for the snapshot's job tuple: the core asks
        :meth:`would_adopt` and then :meth:`assign` over the same snapshot."""
        c = self.memo.active_cache
        if c is None or c[0] is not snap.jobs:
            c = (snap.jobs, active_by_id(snap))
            self.memo.active_cache = c
        return c[1]

    def to_state(self) -> dict[str, Any]:
        return {**self.state.to_dict(), **self.settings()}

    def settings(self) -> dict[str, Any]:
        """What :meth:`to_state` holds besides the bookkeeping (:class:`RoundState`)."""
        return {
            "shuffle_types": self.shuffle_types,
            "seed": self.seed,
            "min_reset_interval_s": self.min_reset_interval_s,
            "skip_zero_priority": self.skip_zero_priority,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RoundMechanism:
        return cls(
            shuffle_types=bool(state["shuffle_types"]),
            seed=int(state["seed"]),
            min_reset_interval_s=float(state["min_reset_interval_s"]),
            skip_zero_priority=bool(state.get("skip_zero_priority", False)),
            state=RoundState.from_dict(state),
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Become the mechanism :meth:`to_state` saved, with every memo dropped."""
        restored = self.from_state(state)
        restored.index_from = self.index_from
        for f in fields(self):
            setattr(self, f.name, getattr(restored, f.name))

    def priorities(self, snap: ClusterSnapshot) -> dict[GpuType, dict[str, float]]:
        """Current priority of every candidate entry per GPU type (for tests and reports)."""
        active = active_by_id(snap)
        gpus = self._gpus(snap)
        self._thr = self.memo.throughput_rows(snap, active, gpus)
        rows = self._entry_rows(snap, active)
        wt, skip_zero = self.state.worker_time, self.skip_zero_priority
        return {gt: {e[3]: e[0] for e in rank(rows, gt, wt.get(gt, 0.0), skip_zero)} for gt in gpus}

    # ------------------------------------------------------------------ bookkeeping

    def _gpus(self, snap: ClusterSnapshot) -> dict[GpuType, int]:
        """``snap.gpus_by_type()``, cached while the snapshot carries the same node tuple."""
        c = self.memo.gpus_cache
        if c is None or c[0] is not snap.nodes or c[1] != snap.lent_nodes:
            c = (snap.nodes, snap.lent_nodes, snap.gpus_by_type())
            self.memo.gpus_cache = c
        return c[2]

    def _capacity(self, snap: ClusterSnapshot) -> dict[GpuType, int]:
        """The training pool's GPUs per type, loans left out (the policy's own choice, not
        the cluster's): what a reset records and a node joining or leaving changes."""
        c = self.memo.capacity_cache
        if c is None or c[0] is not snap.nodes:
            c = (snap.nodes, _training(snap))
            self.memo.capacity_cache = c
        return c[1]

    # ------------------------------------------------------------------ selection

    def _candidates(self, active: Mapping[JobId, JobView]) -> list[str]:
        """Every active job, then the allocation's pairs whose members are both active."""
        ref = self.state.alloc_ref
        if self.memo.pairs_cache is None or self.memo.pairs_cache[0] is not ref:
            pairs = [
                (key, members)
                for key, per in ref.items()
                if PAIR_SEP in key
                and len(members := split_pair(key)) == 2
                and any(x > 0 for x in per.values())
            ]
            self.memo.pairs_cache = (ref, pairs)
        keys: list[str] = list(active)
        keys += [k for k, members in self.memo.pairs_cache[1] if all(m in active for m in members)]
        return keys

    def _type_order(
        self, gpus: Mapping[GpuType, int], order: list[GpuType] | None = None
    ) -> list[GpuType]:
        """Fastest type first (:mod:`lyra_ray.scheduling.type_order`; ``order`` where the
        caller has it), shuffled each round for the policies that ask (Gavel's agnostic)."""
        if order is None:
            order = self.memo.type_orders.order(self._thr, gpus)
        if self.shuffle_types:
            self._type_shuffler(len(order)).shuffle(order)
        return order

    def _type_shuffler(self, n_types: int) -> random.Random:
        """Gavel's ``_worker_type_shuffler``: one ``Random(seed + 5)`` that shuffles the
        type list once per round, in sequence. The stream is positioned at this round by
        replaying ``state.rounds`` shuffles (of a list as long as this one) when the memo
        is missing, e.g. after a restore, so a restored core shuffles alike."""
        memo = self._shuffler
        if memo is None or memo[0] != self.state.rounds:
            rng = random.Random(self.seed + 5)
            for _ in range(self.state.rounds):
                rng.shuffle(list(range(n_types)))
            memo = (self.state.rounds, rng)
        self._shuffler = (memo[0] + 1, memo[1])
        return memo[1]

    def _entry_rows(self, snap: ClusterSnapshot, active: Mapping[JobId, JobView]) -> list[EntryRow]:
        """Per candidate: (key, runnable types, X row, time row, deficit row)."""
        fractions, job_time, deficits = (
            self.state.alloc_ref,
            self.state.job_time,
            self.state.deficits,
        )
        c = self.memo.entry_cache
        same = c is not None and (
            c[0][0] is fractions and c[0][1] is job_time and c[0][2] is deficits
        )
        if same and c is not None and c[3] is self._thr:  # the same jobs, rows and X
            return c[2]
        keys = self._candidates(active)
        sig = (fractions, job_time, deficits)
        if same and c is not None and c[1] == keys:
            self.memo.entry_cache = (sig, keys, c[2], self._thr)
            return c[2]
        rows = [
            (
                key,
                self._runnable_types(snap, key, active),
                fractions.get(key, _EMPTY),
                job_time.get(key, _EMPTY),
                deficits.get(key, _EMPTY),
            )
            for key in keys
        ]
        self.memo.entry_cache = (sig, keys, rows, self._thr)
        return rows

    def _runnable_types(
        self, snap: ClusterSnapshot, key: str, active: Mapping[JobId, JobView]
    ) -> set[GpuType]:
        """GPU types the entry can run on, cached per entry and (identity of) its rows."""
        thr = self._thr
        if key in thr:  # a single job
            rows: tuple[Row, ...] = (thr[key],)
            hit = self.memo.run_cache.get(key)
            if hit is not None and hit[0][0] is rows[0]:
                return hit[1]
            types = {g for g, v in rows[0].items() if v > 0}
        else:
            members = split_pair(key)
            rows = tuple(thr[m] for m in members)
            hit = self.memo.run_cache.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], rows, strict=True)):
                return hit[1]
            a, b = (active[m] for m in members)
            types = {g for g in rows[0] if pair_runnable(snap, a, b, g)}
        self.memo.run_cache[key] = (rows, types)
        return types


def _training(snap: ClusterSnapshot) -> dict[GpuType, int]:
    out: dict[GpuType, int] = {}
    for n in snap.nodes:
        if n.pool == "training":
            out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out
