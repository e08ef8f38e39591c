"""From teams and a snapshot to the bounds an allocation must respect (:class:`TeamBounds`).

Kueue reserves quota for what a team asks; so does this, once per decision and from the
snapshot alone (no state: a restarted scheduler bounds alike):

0. Running jobs of teams that may not be preempted keep their minimum on their type.
1. **Claims.** Each limited team's jobs, running ones first (oldest start first, on the
   type they run on), then queued ones by arrival (on their fastest type with room),
   claim their minimum from the team's guarantee while it lasts. A claim names a type only
   to count the guarantee; the policy still places the job wherever it chooses.
2. **Reservations.** A team's reservation of a type is what its claims take of it, plus
   the part of its idle guarantee it may not lend (``lend_limit``: GPUs over all types, or
   reference units; what it leaves idle beyond that is lent).
3. **Bounds** (:class:`lyra_ray.model.team_bounds.TeamBounds`): the share rule over the
   reservations (per type, the teams' ``max(use, reserved)`` summed stay within the
   capacity); a *floor* per team that claims (its own use, over all types, is at least
   its claims, on whichever types the policy chooses); a *limit* per team with a
   ``borrow_limit``. The claims themselves, each claiming job on its claimed type, meet
   every bound at once, so the rows never make an LP infeasible.

So a lender's new job claims its guarantee at once, the share rule shrinks what the
borrowers may hold, and the inner policy takes it back from them by its own rules (a
worker-count policy drops flexible workers before any job's minimum). Capacity no
guarantee covers, and idle guarantee a team may lend, stay open to everyone.

Effective quotas count reference units (:mod:`lyra_ray.model.team_accounting`): a job's
GPU counts its own throughput ratio to the reference type, else the type's factor; the
capacity is the pool's GPUs times the factors (the capacity rule stated there).

WHY claims by minimum only: an elastic job's flexible workers come after every other
team's minimum, as they did when admission came first (docs/teams.md), so a lender's
growing elastic job never preempts a borrower's minimum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView, NodeId
from lyra_ray.model.team_accounting import effective_capacity
from lyra_ray.model.team_bounds import Ledger, Limit, QuotaRow, TeamBounds
from lyra_ray.model.teams import EFFECTIVE, TeamSet

STAR = "*"
"""The key of an effective quota's amounts in :class:`TeamBounds` (every type at once)."""


def row_ratio(job: JobView, snap: ClusterSnapshot, gpu_type: GpuType, ref: GpuType) -> float | None:
    """``rate(gpu_type) / rate(ref)`` at the job's size, from the core's cached row."""
    if gpu_type == ref:
        return 1.0
    row = job.throughput
    here = row.get(gpu_type)
    there = row.get(ref)
    if here is None:
        here = snap.throughput(job, gpu_type)
    if there is None:
        there = snap.throughput(job, ref)
    if not (here > 0 and there > 0):
        return None
    return here / there


def view_factors(
    snap: ClusterSnapshot, jobs: Iterable[JobView], capacity: Mapping[GpuType, int], ref: GpuType
) -> dict[GpuType, float]:
    """:func:`lyra_ray.model.team_accounting.reference_factors` over the snapshot's views
    (their cached rates: the same numbers, without asking the model again)."""
    num: dict[GpuType, float] = {}
    den: dict[GpuType, float] = {}
    types = [g for g in capacity if g != ref]
    for j in jobs:
        w = float(max(1, j.spec.min_workers))
        for g in types:
            r = row_ratio(j, snap, g, ref)
            if r is not None:
                num[g] = num.get(g, 0.0) + w * r
                den[g] = den.get(g, 0.0) + w
    out = {g: (num[g] / den[g] if den.get(g) else 1.0) for g in types}
    out[ref] = 1.0
    return out


def own_training(snap: ClusterSnapshot) -> dict[GpuType, int]:
    """The training pool's GPUs by type, loaned inference servers left out (the pool the
    default reference type is chosen from: a loan does not change what it means)."""
    out: dict[GpuType, int] = {}
    for n in snap.nodes:
        if n.pool == "training":
            out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out


@dataclass
class Claims:
    """Steps 0-2 of the module docstring: what each team reserves, and what the rows need."""

    teams: TeamSet
    reference: GpuType
    team_of: dict[JobId, str]
    reserved: dict[str, dict[str, float]]
    """team -> type (``*`` for effective) -> reserved amount."""
    claimed: dict[str, dict[str, float]]
    """team -> type (``*``) -> what its jobs' minimums claim of its guarantee."""
    per_gpu: dict[JobId, dict[GpuType, float]] = field(default_factory=dict)
    factors: dict[GpuType, float] = field(default_factory=dict)
    running: list[JobView] = field(default_factory=list)
    """Running jobs, those of teams that may not be preempted first, then oldest start
    first: the order in which the bounds keep their minimums."""

    @property
    def effective(self) -> bool:
        return self.teams.unit == "effective"

    def bounds(self, capacity: Mapping[GpuType, int]) -> TeamBounds:
        """The rows for a pool of ``capacity`` GPUs per type (inference servers lent
        included: they belong to no team's guarantee)."""
        if self.effective:
            cap: dict[str, float] = {STAR: effective_capacity(capacity, self.factors)}
        else:
            cap = {g: float(n) for g, n in capacity.items()}
        floors = []
        for team in sorted(self.claimed):
            owed = sum(self.claimed[team].values())
            if owed > 0:
                every = None if self.effective else frozenset(capacity)
                floors.append(QuotaRow(frozenset([team]), every, owed, "floor"))
        limits = {
            name: Limit(self._guarantee(name), float(t.borrow_limit))
            for name, t in self.teams.teams.items()
            if t.limited and t.borrow_limit is not None
        }
        out = TeamBounds(
            team_of=self.team_of,
            capacity=cap,
            reserved=self.reserved,
            limits=limits,
            floors=tuple(floors),
            effective=self.effective,
            per_gpu=self.per_gpu,
        )
        ledger = Ledger(out, book=False)
        keep: dict[JobId, tuple[GpuType, int]] = {}
        for j in self.running:
            assert j.current is not None
            g, n = j.current.gpu_type, j.spec.min_workers
            owner = self.teams.teams.get(self.team_of.get(j.id, ""))
            if ledger.fits(j.id, g, n) or (owner is not None and not owner.preemptible):
                ledger.take(j.id, g, n)
                keep[j.id] = (g, n)
        return dataclasses.replace(out, keep=keep)

    def _guarantee(self, name: str) -> dict[str, float]:
        g = self.teams.teams[name].guarantee()
        return {STAR: g.get(EFFECTIVE, 0.0)} if self.effective else g


def claim(
    snap: ClusterSnapshot,
    teams: TeamSet,
    jobs: Iterable[JobView] | None = None,
    team_of: dict[JobId, str] | None = None,
) -> Claims:
    """Steps 0-2 of the module docstring over the snapshot's active jobs (``team_of``:
    each job's team where the caller knows it already)."""
    active = list(snap.active_jobs if jobs is None else jobs)
    cap = snap.gpus_by_type()
    ref = teams.reference_for(own_training(snap))
    effective = teams.unit == "effective"
    if team_of is None:
        team_of = {j.id: teams.team_of(j.spec) for j in active}
    factors: dict[GpuType, float] = {}
    per_gpu: dict[JobId, dict[GpuType, float]] = {}
    if effective:
        factors = view_factors(snap, active, cap, ref)
        for j in active:
            per_gpu[j.id] = {
                g: r if (r := row_ratio(j, snap, g, ref)) is not None else factors.get(g, 1.0)
                for g in cap
            }

    def key(g: GpuType) -> str:
        return STAR if effective else g

    def cost(j: JobView, g: GpuType, n: int) -> float:
        return n * per_gpu[j.id][g] if effective else float(n)

    guarantee = {
        name: ({STAR: t.guarantee().get(EFFECTIVE, 0.0)} if effective else t.guarantee())
        for name, t in teams.teams.items()
        if t.limited
    }
    claimed: dict[str, dict[str, float]] = {name: {} for name in guarantee}
    free = {g: float(n) for g, n in cap.items()}
    running = sorted(
        (j for j in active if j.current is not None),
        key=lambda j: (
            j.first_start_s if j.first_start_s is not None else j.arrival_s,
            j.arrival_s,
            j.id,
        ),
    )

    def take(team: str, j: JobView, g: GpuType, n: int) -> None:
        free[g] -= n
        if team in claimed:
            k = key(g)
            own = min(cost(j, g, n), guarantee[team].get(k, 0.0) - claimed[team].get(k, 0.0))
            if own > 0:
                claimed[team][k] = claimed[team].get(k, 0.0) + own

    done: set[JobId] = set()
    for j in running:  # 0: what a team that may not be preempted runs stays
        t = teams.teams.get(team_of[j.id])
        assert j.current is not None
        g, n = j.current.gpu_type, j.spec.min_workers
        if t is not None and not t.preemptible and free.get(g, 0.0) >= n:
            take(t.name, j, g, n)
            done.add(j.id)
    # The most any key of a team's guarantee has left: a job needing more claims nothing
    # (with 10,000 queued jobs and every guarantee nearly claimed, most are passed over
    # without looking at their types, and only the rest are sorted by arrival).
    left = {name: max(g.values(), default=0.0) for name, g in guarantee.items()}

    def least(j: JobView) -> float:
        n = j.spec.min_workers
        return n * min(per_gpu[j.id].values(), default=1.0) if effective else float(n)

    def claims(jobs: Iterable[JobView]) -> None:
        for j in jobs:
            team = team_of[j.id]
            if team not in guarantee or j.id in done or least(j) > left[team] + 1e-9:
                continue
            n = j.spec.min_workers
            for g in _types(j, snap, cap):
                k = key(g)
                room = guarantee[team].get(k, 0.0) - claimed[team].get(k, 0.0)
                if free.get(g, 0.0) >= n and cost(j, g, n) <= room + 1e-9:
                    take(team, j, g, n)
                    left[team] = max(
                        (v - claimed[team].get(k2, 0.0) for k2, v in guarantee[team].items()),
                        default=0.0,
                    )
                    break

    claims(running)  # 1: claims on the guarantee, running jobs first, then by arrival
    claims(
        sorted(
            (
                j
                for j in active
                if j.current is None
                and team_of[j.id] in guarantee
                and least(j) <= left[team_of[j.id]] + 1e-9
            ),
            key=lambda j: (j.arrival_s, j.id),
        )
    )
    reserved = {name: dict(c) for name, c in claimed.items()}
    for name, amounts in guarantee.items():  # 2: idle guarantee it may not lend stays reserved
        lend = teams.teams[name].lend_limit
        idle = {k: max(0.0, v - claimed[name].get(k, 0.0)) for k, v in amounts.items()}
        total = sum(idle.values())
        if lend is None or total <= lend or total <= 0:
            continue
        keep = 1.0 - lend / total
        for k, v in idle.items():
            reserved[name][k] = reserved[name].get(k, 0.0) + v * keep
    _fit(reserved, cap if not effective else {STAR: effective_capacity(cap, factors)})
    first = [j for j in running if j.id in done] + [j for j in running if j.id not in done]
    return Claims(teams, ref, team_of, reserved, claimed, per_gpu, factors, first)


def _fit(reserved: dict[str, dict[str, float]], cap: Mapping[str, float]) -> None:
    """An oversubscribed cluster (reported elsewhere) reserves no more than it has: every
    team's reservation of a type is scaled down alike."""
    for k, have in cap.items():
        total = sum(r.get(k, 0.0) for r in reserved.values())
        if total > have > 0:
            for r in reserved.values():
                if k in r:
                    r[k] *= have / total


def _types(job: JobView, snap: ClusterSnapshot, cap: Mapping[GpuType, int]) -> list[GpuType]:
    """Where a claim counts a job: its current type first, then its fastest types."""
    need = job.spec.min_workers
    row = job.throughput
    rates = []
    for g in sorted(cap):
        if cap[g] < need:
            continue
        r = row.get(g)
        if r is None:
            r = snap.throughput(job, g)
        if r > 0:
            rates.append((-r, g))
    order = [g for _, g in sorted(rates)]
    if job.current is not None and job.current.gpu_type in order:
        order.remove(job.current.gpu_type)
        order.insert(0, job.current.gpu_type)
    return order


def pool_capacity(snap: ClusterSnapshot, lend: Iterable[NodeId] = ()) -> dict[GpuType, int]:
    """The GPUs the rows count: the training pool, every inference server lent now and
    every one the policy lends in this decision (``lend``)."""
    lent = set(snap.lent_nodes) | set(lend)
    out: dict[GpuType, int] = {}
    for n in snap.nodes:
        if n.pool == "training" or n.id in lent:
            out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out
