"""The ``lyra`` policy: capacity loaning plus two-phase elastic allocation (EuroSys'23).

Each step:

0. *Loaning* (:mod:`lyra_ray.policies.lyra.loaning`): lend idle inference servers, reclaim what
   serving needs back by the dependent-value knapsack, which prefers servers whose
   reclaim only scales jobs in; jobs a reclaim leaves below their minimum are treated as
   queued at once — they restart elsewhere if GPUs are free, else they are preempted.
   Two optional guards against demand noise (a server lent, filled, and reclaimed
   minutes later preempts what runs there), both off by default: ``lend_after_s``, a
   server is lent only once serving has not needed it for that long (it was 10 min;
   re-chosen on the tuning runs at the current restart price; lending at once meets
   the goals against Basic on more runs of every pool evaluated, while the knapsack
   reclaim keeps preemptions within the goal: docs/lyra.md); and a reserve of idle
   servers (``reserve_fraction`` of the pool: it made Lyra queue more than Basic; the
   ablation in docs/lyra.md).
1. *Base demand*: every job's minimum, shortest job first — running jobs first so that
   an arrival never preempts a running job, only takes back its flexible workers. This
   minimises queuing: a job waits only if its minimum does not fit.
2. *Flexible demand* (:mod:`lyra_ray.policies.lyra.flexible`): the GPUs left on each type go to the
   admitted elastic jobs so as to minimise their projected sum of JCTs.
3. *Flexible workers on another type* (:mod:`lyra_ray.policies.lyra.cross_type`): GPUs still idle
   go to elastic jobs based on another type, where the mixed-type model
   (:mod:`lyra_ray.model.mixed`) says they pay for a restart.

Elastic jobs prefer lent servers and rigid jobs training servers (``preferred_nodes``),
so that a reclaim usually means a scale-in; flexible workers on another type go to lent
servers that hold no job's base. A job expected to run longer than
``loan_max_remaining_s`` (4 h: a shorter rule wins on the evaluation's pool and loses
badly on pools with more servers to lend; docs/lyra.md) does not start on a loaned
server at all (it would likely still run when serving wants the server back, and it
would run slowly there). ``finish_first`` (off) is the general form of that rule: a
queued job starts on a slower type only if it finishes there no later than by waiting
for its fastest (:mod:`lyra_ray.policies.lyra.finish_first`). ``basic`` and
``lyra-baseline`` are the paper's comparison scenarios, as configurations of the class
(:mod:`lyra_ray.policies.lyra.scenarios`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobView, NodeId
from lyra_ray.model.team_bounds import ledger_of
from lyra_ray.policies.base import PolicyBase, register
from lyra_ray.policies.lyra.cross_type import Candidate, add_extras
from lyra_ray.policies.lyra.finish_first import FinishFirst, Timeline, judged, wait_for_faster
from lyra_ray.policies.lyra.flexible import greedy_spare, share_spare
from lyra_ray.policies.lyra.loaning import DemandMemory, LoanDecision, ReclaimMode, decide_loans
from lyra_ray.policies.lyra.moves import move_to_faster
from lyra_ray.policies.lyra.preferences import preferred_nodes
from lyra_ray.policies.lyra.projection import FluidJob, fluid_job, release_of
from lyra_ray.policies.lyra.remaining import RemainingTimes, remaining_time
from lyra_ray.policies.lyra.settings import check_settings
from lyra_ray.policies.lyra.team_bounds import extras_within, flexible_within, move_within


def requested_workers(job: JobView) -> int:
    """The size a non-elastic scheduler runs a job at: ``config.requested_workers``/min."""
    raw = job.spec.config.get("requested_workers", job.spec.min_workers)
    want = int(raw) if isinstance(raw, int | float | str) else job.spec.min_workers
    return max(job.spec.min_workers, min(job.spec.max_workers, want))


class LyraPolicy(PolicyBase):
    """Loaning + two-phase allocation; the flags give the paper's comparison scenarios."""

    name: ClassVar[str] = "lyra"

    def __init__(
        self,
        loaning: bool = True,
        elastic: bool = True,
        reclaim: ReclaimMode = "knapsack",
        flexible: str = "mckp",
        search_limit: int = 5,
        rigid_on_loan: bool = True,
        loan_max_remaining_s: float | None = 4 * 3600.0,
        reserve_fraction: float = 0.0,
        mixed_types: bool = True,
        resize_cost_s: float | None = None,
        lend_after_s: float | None = None,
        move_gain_s: float | None = 7200.0,
        move_holds_back: bool = False,
        finish_first: FinishFirst = None,
    ) -> None:
        seconds = dict(
            loan_max_remaining_s=loan_max_remaining_s,
            resize_cost_s=resize_cost_s,
            lend_after_s=lend_after_s,
            move_gain_s=move_gain_s,
        )
        check_settings(search_limit, reserve_fraction, finish_first, seconds)
        self.loaning = loaning
        self.elastic = elastic
        self.reclaim: ReclaimMode = reclaim
        self.flexible = flexible
        self.search_limit = search_limit
        self.rigid_on_loan = rigid_on_loan
        self.loan_max_remaining_s = loan_max_remaining_s
        self.reserve_fraction = reserve_fraction
        self.mixed_types = mixed_types
        """Phase 3: flexible workers on GPUs of another type
        (:mod:`lyra_ray.policies.lyra.cross_type`)."""
        self.resize_cost_s = resize_cost_s
        """What one checkpoint-restart costs a job, against which phases 2 and 3 weigh a
        change: ``None`` (default) prices each job by the snapshot's restart model (its
        checkpoint, start-up and own measured restarts:
        :mod:`lyra_ray.model.restart_cost`); a number charges every job that much (the
        former flat price, for comparison)."""
        self.move_gain_s = move_gain_s
        """After phase 1 has placed every job it can, a running job moves to a faster
        type whose GPUs no job took when that takes at least this many seconds (its
        restart included) off its completion (:mod:`lyra_ray.policies.lyra.moves`);
        ``None``: running jobs stay on their type."""
        self.move_holds_back = move_holds_back
        """A move may not hold back the queued job waiting to gather the GPUs it takes
        (:func:`lyra_ray.policies.lyra.moves.reservations`: EASY backfilling's rule for
        moves). Off by default, a documented trade-off: it keeps a large job from being
        passed over move after move, at a cost in mean queuing and JCT on the
        evaluation's runs (docs/lyra.md)."""
        self.finish_first: FinishFirst = finish_first
        """Which queued jobs wait for a faster type when they would finish sooner
        (:mod:`lyra_ray.policies.lyra.finish_first`); off: it costs queuing (docs/lyra.md)."""
        self.memory = DemandMemory(lend_after_s) if lend_after_s is not None else None
        """Lend only what serving has not needed for ``lend_after_s`` (policy state);
        ``None`` (default): lend what serving does not need now, as the paper's Lyra does."""
        self.remaining = RemainingTimes()
        """Each job's remaining time, cached by view (:mod:`lyra_ray.policies.lyra.remaining`)."""

    def to_state(self) -> dict[str, Any]:
        if self.memory is None:
            return {}
        return {"demand": [[t, d] for t, d in self.memory.points]}

    def load_state(self, state: Mapping[str, Any]) -> None:
        if self.memory is None:
            # WHY "demand" is dropped: a scheduler that saved its memory under a lend
            # delay (600 s was the default) and restarts without one has nothing to
            # hold back; refusing it would keep the scheduler from restoring at all.
            super().load_state({k: v for k, v in state.items() if k != "demand"})
            return
        other = sorted(set(state) - {"demand"})
        if other:  # another policy's state (one saved before the policy's name was kept)
            raise ValueError(
                f"policy {self.name!r} keeps only its demand memory, but a saved state has {other}"
            )
        self.memory.points = [(float(t), int(d)) for t, d in state.get("demand", [])]

    # ------------------------------------------------------------------ helpers
    def _price(self, snap: ClusterSnapshot, job: JobView) -> float:
        """Seconds one restart costs ``job`` (see :attr:`resize_cost_s`)."""
        if self.resize_cost_s is not None:
            return self.resize_cost_s
        return snap.restart_model.price(job.id, job.spec)

    def _base(self, job: JobView) -> int:
        """The GPUs phase 1 starts a job on: its minimum (elastic), else its request."""
        return job.spec.min_workers if self.elastic else requested_workers(job)

    def _reserve(self, snap: ClusterSnapshot) -> int:
        pool = sum(1 for n in snap.nodes if n.pool == "inference")
        return math.ceil(self.reserve_fraction * pool - 1e-9)

    def _capacity(self, snap: ClusterSnapshot, usable: frozenset[NodeId]) -> dict[GpuType, int]:
        cap: dict[GpuType, int] = {}
        for n in snap.nodes:
            if n.pool == "training" or n.id in usable:
                cap[n.gpu_type] = cap.get(n.gpu_type, 0) + n.num_gpus
        return cap

    def _type_order(
        self,
        snap: ClusterSnapshot,
        job: JobView,
        lent_types: set[GpuType],
        all_types: Sequence[GpuType],
        gone: frozenset[NodeId] = frozenset(),
        remaining_s: float | None = None,
    ) -> list[GpuType]:
        types = list(all_types)
        if job.current is not None and job.current.gpu_type in types:
            first = [job.current.gpu_type]
            if job.current.extra:
                # A job on several types keeps its base where most of its workers
                # survive (a reclaim of its base's server leaves it on its flexible
                # workers: a scale-in, not a move); ties keep the base where it is.
                kinds = {n.id: n.gpu_type for n in snap.nodes}
                left: dict[GpuType, int] = {}
                for n, g in job.current.nodes:
                    if n not in gone and n in kinds:
                        left[kinds[n]] = left.get(kinds[n], 0) + g
                base = job.current.gpu_type
                first = sorted(left, key=lambda t: (-left[t], t != base, t)) or first
            return [*(t for t in first if t in types), *(t for t in types if t not in first)]
        rigid = not (self.elastic and job.spec.elastic)
        if remaining_s is None:
            remaining_s = remaining_time(snap, job, types)
        long_ = self.loan_max_remaining_s is not None and remaining_s > self.loan_max_remaining_s
        if (rigid and not self.rigid_on_loan) or long_:
            # A job that would still run when serving wants the server back would be
            # preempted by the reclaim: keep it off loaned servers.
            types = [t for t in types if t not in lent_types]

        def key(t: GpuType) -> tuple[bool, float, GpuType]:
            # Rigid jobs go to loaned (reclaimable) types last: a reclaim would preempt them.
            return (rigid and t in lent_types, -snap.throughput(job, t, job.spec.min_workers), t)

        return sorted(types, key=key)

    # ------------------------------------------------------------------ the step
    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        held = None if self.memory is None else self.memory.held(snap.now, snap.serving_demand)

        def price(job: JobView) -> float:
            return self._price(snap, job)

        loan = (
            decide_loans(snap, self.reclaim, self._reserve(snap), held, price)
            if self.loaning
            else LoanDecision(frozenset())
        )
        cap = self._capacity(snap, loan.lend)
        inference_types = {n.gpu_type for n in snap.nodes if n.pool == "inference"}
        training_types = {n.gpu_type for n in snap.nodes if n.pool == "training"}
        lent_types = inference_types - training_types

        # Jobs a reclaim leaves below their minimum. Basic preempts them; Lyra treats them
        # as queued right away, so they restart elsewhere if GPUs are free (a migration).
        by_id = {j.id: j for j in snap.jobs}
        all_types = sorted(snap.gpus_by_type(None))
        remaining = self.remaining.of(snap, all_types)
        evicted = {j for j, c in loan.workers_cap.items() if c < by_id[j].spec.min_workers}

        # Phase 1: base demand, running jobs first, then shortest job first: running,
        # then evicted by a reclaim (they move, not queue), then queued. Ids are unique,
        # so the job itself is never compared.
        order_keys = [
            (
                2 if j.current is None else int(j.id in evicted),
                remaining[j.id],
                j.arrival_s,
                j.id,
                j,
            )
            for j in snap.active_jobs
        ]
        order_keys.sort()
        jobs = [k[-1] for k in order_keys]
        free = dict(cap)
        gpus = sum(cap.values())
        gone = frozenset(loan.reclaimed)
        chosen: dict[JobId, tuple[GpuType, int, int]] = {}  # job -> (type, workers, upper)
        waiting: dict[JobId, tuple[str, str]] = {}
        most_free = max(free.values(), default=0)
        ledger = ledger_of(snap.team_bounds)  # teams' quotas, when the wrapper asks
        lines: dict[GpuType, Timeline] = {}  # finish_first's projections, built when asked

        def admit(job: JobView) -> None:
            """Phase 1 for one job: its base on the first type of its order with room."""
            nonlocal most_free
            limit = loan.workers_cap.get(job.id, job.spec.max_workers)
            if job.id in evicted:
                if self.reclaim == "naive":
                    return
                limit = job.spec.max_workers
            base = self._base(job)
            if base > most_free or job.remaining_steps <= 0:
                # No type has ``base`` GPUs free: neither a placement nor a loan rule
                # applies (both need one). With 10,000 queued jobs on a full cluster this
                # skips the per-type ordering of nearly every job.
                return
            if ledger is not None and not any(
                free[t] >= base and ledger.fits(job.id, t, base) for t in free
            ):
                return  # its team's bounds leave it no room: skip the ordering too
            order = self._type_order(snap, job, lent_types, all_types, gone, remaining[job.id])
            for t in order:
                if free.get(t, 0) >= base and snap.throughput(job, t, base) > 0:
                    if ledger is not None and not ledger.fits(job.id, t, base):
                        continue
                    if judged(self.finish_first, self.elastic, job):
                        why = wait_for_faster(snap, job, t, base, order, cap, free, chosen, lines)
                        if why is not None:
                            waiting[job.id] = why
                            return
                    if ledger is not None:
                        ledger.take(job.id, t, base)
                    free[t] -= base
                    if t in lines:
                        rate = snap.throughput(job, t, base)
                        lines[t].occupy(base, job.remaining_steps / rate)
                    most_free = max(free.values(), default=0)
                    # never more workers than the cluster has GPUs (phase 3 may add
                    # other types): a job asking for a million would otherwise cost a
                    # million knapsack items every decision
                    upper = min(limit, job.spec.max_workers, gpus) if self.elastic else base
                    chosen[job.id] = (t, base, upper)
                    return
            if job.current is None and any(
                t not in order and free.get(t, 0) >= base and snap.throughput(job, t, base) > 0
                for t in lent_types
            ):
                waiting[job.id] = self._loan_rule(snap, job, remaining[job.id])

        for job in jobs:
            admit(job)
        if self.move_gain_s is not None and move_to_faster(
            snap,
            chosen,
            free,
            self.move_gain_s,
            price,
            None if ledger is None else move_within(ledger),
            [(j, self._base(j)) for j in jobs if j.id not in chosen and j.remaining_steps > 0]
            if self.move_holds_back
            else [],
        ):
            # GPUs the moved jobs left: any queued job that fits there now starts.
            most_free = max(free.values(), default=0)
            lines.clear()
            for job in jobs:
                if job.current is None and job.id not in chosen:
                    admit(job)

        # Phase 2: flexible demand per GPU type.
        workers = {j: (t, w) for j, (t, w, _) in chosen.items()}
        if self.elastic:
            for t in sorted(cap):
                on_t = [j for j, c in chosen.items() if c[0] == t]  # in ``jobs`` order
                ids = [j for j in on_t if chosen[j][2] > chosen[j][1]]
                if free.get(t, 0) <= 0 or not ids:
                    continue
                # Jobs that cannot grow only matter by the GPUs they free when they finish.
                releases = [
                    release_of(snap, by_id[j], t, chosen[j][1])
                    for j in on_t
                    if chosen[j][2] <= chosen[j][1]
                ]
                fluid = [fluid_job(snap, by_id[j], t, chosen[j], gone, price) for j in ids]
                total = sum(f.min_workers for f in fluid) + free[t]
                sizes = self._share(fluid, total, releases)
                if ledger is not None:
                    sizes = flexible_within(ledger, ids, t, [chosen[j][1] for j in ids], sizes)
                for j, w in zip(ids, sizes, strict=True):
                    workers[j] = (t, w)
                    free[t] -= w - chosen[j][1]
        extra: dict[JobId, tuple[tuple[GpuType, int], ...]] = {}
        if self.elastic and self.mixed_types:
            # Phase 3: what is still idle, as flexible workers of jobs based elsewhere.
            cands = [
                Candidate(by_id[j], t, w, chosen[j][2])
                for j, (t, w) in workers.items()
                if chosen[j][2] > w
            ]
            extra = add_extras(snap, cands, free, price)
            if ledger is not None:
                extra = extras_within(ledger, extra)
            for j, parts in extra.items():
                t, w = workers[j]
                workers[j] = (t, w + sum(k for _, k in parts))
        return Allocation(
            workers=workers,
            lend=loan.lend,
            preferred_nodes=preferred_nodes(
                snap, workers, loan.lend, extra, lambda j: self.elastic and j.spec.elastic
            ),
            extra=extra,
            waiting=waiting,
        )

    def _loan_rule(
        self, snap: ClusterSnapshot, job: JobView, remaining_s: float
    ) -> tuple[str, str]:
        """Why a job that would fit on a lent server is kept off it."""
        if not (self.elastic and job.spec.elastic) and not self.rigid_on_loan:
            return (
                "loan_rule",
                "lent servers are free, but a rigid job stays off them "
                "(a reclaim would preempt it)",
            )
        hours = (self.loan_max_remaining_s or 0.0) / 3600
        return (
            "loan_rule",
            f"lent servers are free, but it would still run in "
            f"{remaining_s / 3600:.1f} h, past the {hours:g}-hour rule for loans",
        )

    def _share(
        self, fluid: Sequence[FluidJob], total: int, releases: Sequence[tuple[float, int]]
    ) -> tuple[int, ...]:
        if self.flexible == "greedy":
            return greedy_spare(fluid, total)
        return share_spare(fluid, total, self.search_limit, releases=releases)


register(LyraPolicy)
