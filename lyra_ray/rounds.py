"""Gavel's round mechanism: turn time fractions X into this round's GPU assignment.

A policy says *what fraction of time* each job (or job pair) should spend on each GPU
type; a round says *who runs now*. Gavel (``scheduler.py``: ``_update_priorities``,
``_reset_time_run_so_far``, ``_schedule_jobs_on_workers_helper``) does it like this, and
so does this module (docs/gavel.md lists every rule):

1. Bookkeeping. Per (job or pair, GPU type) the time it ran since the last *reset*, and
   per GPU type the sum of those times. A reset happens when the set of active jobs
   changed (an arrival or a completion) and at least ``min_reset_interval_s`` passed
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
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model import (
    Allocation,
    Assignment,
    ClusterSnapshot,
    GpuType,
    JobId,
    JobView,
    pair_key,
    split_pair,
)

BIG = 1e9  # Gavel's "nothing received yet" multiplier (not inf: larger X still sorts first)


@dataclass
class RoundMechanism:
    """Gavel's priority-based round mechanism; one instance per scheduler core."""

    shuffle_types: bool = False
    """Gavel shuffles the GPU-type order each round for its agnostic policies."""
    seed: int = 0
    min_reset_interval_s: float = 1920.0
    """Gavel's default; 0 adopts every new allocation at the next round."""
    skip_zero_priority: bool = False
    """Gavel's FIFO rule: never hand idle GPUs to entries the allocation gives nothing."""
    _job_time: dict[str, dict[GpuType, float]] = field(default_factory=dict)
    _worker_time: dict[GpuType, float] = field(default_factory=dict)
    _deficits: dict[str, dict[GpuType, float]] = field(default_factory=dict)
    _alloc_ref: dict[str, dict[GpuType, float]] = field(default_factory=dict)
    _seen: dict[JobId, dict[GpuType, float]] = field(default_factory=dict)
    _job_set: list[JobId] = field(default_factory=list)
    _last_reset: float | None = None
    _rounds: int = 0
    _thr: dict[JobId, dict[GpuType, float]] = field(default_factory=dict, repr=False)
    _order_cache: tuple[object, list[GpuType]] | None = field(default=None, repr=False)
    _run_cache: dict[str, tuple[object, set[GpuType]]] = field(default_factory=dict, repr=False)
    _cands: list[tuple[str, set[GpuType]]] | None = field(default=None, repr=False)

    def assign(
        self,
        snap: ClusterSnapshot,
        allocation: Allocation,
        previous: Mapping[JobId, Assignment] | None = None,
        pinned: Mapping[JobId, Assignment] | None = None,
    ) -> dict[JobId, Assignment]:
        """This round's assignment for the jobs ``allocation.fractions`` covers.

        ``pinned`` jobs keep their assignment whatever their priority (the core's minimum
        lease): their GPUs are taken before the greedy pass hands out the rest.
        """
        prev = dict(previous or {})
        self._cands = None
        active = {j.id: j for j in snap.active_jobs}
        gpus = snap.gpus_by_type()
        self._thr = {j.id: self._row(snap, j, gpus) for j in active.values()}
        self._credit(active, prev)
        if self.would_adopt(snap):
            self._reset(snap.now, active, allocation, snap.round_s / 2.0)
        allocation = Allocation(fractions=self._alloc_ref)
        order = self._type_order(gpus)
        queue = [(e[3], gt) for gt in order for e in self._entries(snap, active, allocation, gt)]
        out = self._greedy(queue, active, gpus, prev, pinned or {})
        self._rounds += 1
        return out

    def would_adopt(self, snap: ClusterSnapshot) -> bool:
        """Whether a round now would take a new allocation (else the old X stays).

        The core asks this to skip solving a policy whose answer would be ignored.
        """
        last = self._last_reset
        # Gavel tests ``last_reset_time == 0`` as "never reset", so a reset at t = 0 does
        # not start the interval: the next change is adopted at once.
        if last is not None and last != 0.0 and snap.now - last < self.min_reset_interval_s:
            return False
        return sorted(j.id for j in snap.active_jobs) != self._job_set

    def to_state(self) -> dict[str, Any]:
        return {
            "job_time": self._job_time,
            "worker_time": self._worker_time,
            "deficits": self._deficits,
            "alloc_ref": self._alloc_ref,
            "seen": self._seen,
            "job_set": self._job_set,
            "last_reset": self._last_reset,
            "rounds": self._rounds,
            "shuffle_types": self.shuffle_types,
            "seed": self.seed,
            "min_reset_interval_s": self.min_reset_interval_s,
            "skip_zero_priority": self.skip_zero_priority,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RoundMechanism:
        def nested(d: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
            return {k: {g: float(x) for g, x in v.items()} for k, v in d.items()}

        return cls(
            shuffle_types=bool(state["shuffle_types"]),
            seed=int(state["seed"]),
            min_reset_interval_s=float(state["min_reset_interval_s"]),
            skip_zero_priority=bool(state.get("skip_zero_priority", False)),
            _job_time=nested(state["job_time"]),
            _worker_time={g: float(x) for g, x in state["worker_time"].items()},
            _deficits=nested(state["deficits"]),
            _alloc_ref=nested(state["alloc_ref"]),
            _seen=nested(state["seen"]),
            _job_set=list(state["job_set"]),
            _last_reset=None if state["last_reset"] is None else float(state["last_reset"]),
            _rounds=int(state["rounds"]),
        )

    def priorities(self, snap: ClusterSnapshot) -> dict[GpuType, dict[str, float]]:
        """Current priority of every candidate entry per GPU type (for tests and reports)."""
        active = {j.id: j for j in snap.active_jobs}
        gpus = snap.gpus_by_type()
        self._thr = {j.id: self._row(snap, j, gpus) for j in active.values()}
        alloc = Allocation(fractions=self._alloc_ref)
        self._cands = None
        return {gt: {e[3]: e[0] for e in self._entries(snap, active, alloc, gt)} for gt in gpus}

    # ------------------------------------------------------------------ bookkeeping

    @staticmethod
    def _row(
        snap: ClusterSnapshot, job: JobView, types: Mapping[GpuType, int]
    ) -> dict[GpuType, float]:
        """steps/s per GPU type: the core's cached row, else the throughput model."""
        row = job.throughput
        if all(g in row for g in types):
            return {g: float(row[g]) for g in types}
        return {g: snap.throughput(job, g) for g in types}

    def _credit(self, active: Mapping[JobId, JobView], prev: Mapping[JobId, Assignment]) -> None:
        """Add last round's run time to the entry (job or pair) that ran, and its type."""
        done: set[str] = set()
        for jid, a in prev.items():
            key = pair_key(jid, a.partner) if a.partner else jid
            if key in done:
                continue
            done.add(key)
            delta = 0.0
            for member in split_pair(key):
                job = active.get(member)
                if job is None:
                    continue
                now_t = float(job.time_received_s.get(a.gpu_type, 0.0))
                seen = self._seen.get(member, {}).get(a.gpu_type, 0.0)
                delta = max(delta, now_t - seen)
            if delta <= 0:
                continue
            per = self._job_time.setdefault(key, {})
            per[a.gpu_type] = per.get(a.gpu_type, 0.0) + delta
            self._worker_time[a.gpu_type] = self._worker_time.get(a.gpu_type, 0.0) + delta
        self._seen = {jid: dict(j.time_received_s) for jid, j in active.items()}

    def _reset(
        self, now: float, active: Mapping[JobId, JobView], allocation: Allocation, half: float
    ) -> None:
        """Gavel's ``_reset_time_run_so_far``: fold the last period into deficits, restart."""
        elapsed = 0.0 if self._last_reset is None else now - self._last_reset
        types = set(self._worker_time)
        for per in allocation.fractions.values():
            types.update(per)
        keys = set(self._job_time) | set(self._alloc_ref)
        for key in keys:
            per_def = self._deficits.setdefault(key, {})
            for gt in types:
                got = self._job_time.get(key, {}).get(gt)
                received = 0.0 if got is None else got - half
                should = self._alloc_ref.get(key, {}).get(gt, 0.0) * elapsed
                per_def[gt] = per_def.get(gt, 0.0) + should - received
        live = set(active)
        self._deficits = {
            k: v for k, v in self._deficits.items() if all(m in live for m in split_pair(k))
        }
        new_keys = set(active) | {
            k for k in allocation.fractions if all(m in live for m in split_pair(k))
        }
        self._job_time = {k: dict.fromkeys(types, half) for k in new_keys}
        self._worker_time = {gt: half * len(new_keys) for gt in types}
        self._job_set = sorted(active)
        self._last_reset = now
        self._run_cache = {k: v for k, v in self._run_cache.items() if k in self._job_time}
        self._alloc_ref = {k: dict(v) for k, v in allocation.fractions.items()}

    # ------------------------------------------------------------------ selection

    def _candidates(self, active: Mapping[JobId, JobView], allocation: Allocation) -> list[str]:
        keys: list[str] = list(active)
        for key, per in allocation.fractions.items():
            members = split_pair(key)
            if (
                len(members) == 2
                and all(m in active for m in members)
                and any(x > 0 for x in per.values())
            ):
                keys.append(key)
        return keys

    def _runnable(
        self, snap: ClusterSnapshot, key: str, gt: GpuType, active: Mapping[JobId, JobView]
    ) -> bool:
        members = split_pair(key)
        if len(members) == 1:
            return self._thr[key].get(gt, 0.0) > 0
        a, b = (active[m] for m in members)
        pt = snap.throughput_model.pair_throughput(a.spec, b.spec, gt)
        return pt is not None and pt[0] > 0 and pt[1] > 0

    def _type_order(self, gpus: Mapping[GpuType, int]) -> list[GpuType]:
        """Fastest type first (Gavel hard-codes v100, p100, k80), optionally shuffled.

        Speed of a type = sum over active jobs of its throughput there relative to the
        job's best type; recomputed only when the set of jobs changes.
        """
        sig = (frozenset(self._thr), tuple(sorted(gpus.items())))
        if self._order_cache is None or self._order_cache[0] != sig:
            speed = dict.fromkeys(gpus, 0.0)
            for row in self._thr.values():
                best = max(row.values(), default=0.0)
                if best > 0:
                    for g, v in row.items():
                        speed[g] += v / best
            ranked = sorted((g for g, c in gpus.items() if c > 0), key=lambda g: (-speed[g], g))
            self._order_cache = (sig, ranked)
        order = list(self._order_cache[1])
        if self.shuffle_types:
            random.Random(self.seed * 1_000_003 + self._rounds).shuffle(order)
        return order

    def _entries(
        self,
        snap: ClusterSnapshot,
        active: Mapping[JobId, JobView],
        allocation: Allocation,
        gt: GpuType,
    ) -> list[tuple[float, float, float, str]]:
        """(priority, deficit, X, key) of every entry that can run on ``gt``, best first."""
        fractions, deficits, job_time = allocation.fractions, self._deficits, self._job_time
        empty: dict[GpuType, float] = {}
        total = self._worker_time.get(gt, 0.0)
        entries = []
        if self._cands is None:
            keys = self._candidates(active, allocation)
            self._cands = [(k, self._runnable_types(snap, k, active)) for k in keys]
        for key, runnable in self._cands:
            if gt not in runnable:
                continue
            x = fractions.get(key, empty).get(gt, 0.0)
            if x <= 0:
                if self.skip_zero_priority:
                    continue
                pr = 0.0
            else:
                mine = job_time.get(key, empty).get(gt, 0.0)
                pr = x * BIG if total <= 0 or mine <= 0 else x * total / mine
            entries.append((pr, deficits.get(key, empty).get(gt, 0.0), x, key))
        entries.sort(key=lambda e: (e[0], e[1], e[2]), reverse=True)
        return entries

    def _runnable_types(
        self, snap: ClusterSnapshot, key: str, active: Mapping[JobId, JobView]
    ) -> set[GpuType]:
        """GPU types the entry can run on, cached per entry and throughput row."""
        members = split_pair(key)
        rows = tuple(tuple(sorted(self._thr[m].items())) for m in members)
        hit = self._run_cache.get(key)
        if hit is not None and hit[0] == rows:
            return hit[1]
        if len(members) == 1:
            types = {g for g, v in self._thr[key].items() if v > 0}
        else:
            types = {g for g in self._thr[members[0]] if self._runnable(snap, key, g, active)}
        self._run_cache[key] = (rows, types)
        return types

    def _greedy(
        self,
        queue: list[tuple[str, GpuType]],
        active: Mapping[JobId, JobView],
        gpus: Mapping[GpuType, int],
        prev: Mapping[JobId, Assignment],
        pinned: Mapping[JobId, Assignment],
    ) -> dict[JobId, Assignment]:
        left = {g: c for g, c in gpus.items() if c > 0}
        out: dict[JobId, Assignment] = {}
        for jid, a in pinned.items():
            if jid in active and left.get(a.gpu_type, 0) >= a.workers:
                out[jid] = a
                left[a.gpu_type] -= a.workers
        left = {g: c for g, c in left.items() if c > 0}
        for key, gt in queue:
            free = left.get(gt, 0)
            if free <= 0:
                continue
            if key in active:  # a single job (the common case)
                if key in out:
                    continue
                members: tuple[JobId, ...] = (key,)
                need = max(1, active[key].spec.min_workers)
            else:
                members = split_pair(key)
                if any(m in out for m in members):
                    continue
                need = max(max(1, active[m].spec.min_workers) for m in members)
            if need > free:
                continue
            left[gt] = free - need
            for m in members:
                partner = next((o for o in members if o != m), None)
                old = prev.get(m)
                if old is not None and old.gpu_type == gt and old.partner == partner:
                    out[m] = old
                else:
                    out[m] = Assignment(gpu_type=gt, workers=need, partner=partner)
            if left[gt] == 0:
                del left[gt]
                if not left:
                    break  # every GPU is taken
        return out
