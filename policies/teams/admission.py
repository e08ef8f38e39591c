"""Which jobs a team may run now, on which GPU type, at how many workers at most.

Kueue's admission one level up, recomputed from every snapshot (so it keeps no state,
and a restarted scheduler admits alike):

0. Running jobs of teams that may not be preempted keep their GPUs (borrowed or not:
   such a team's lenders may then get less than their guarantee).
1. **Guarantees.** Each limited team's jobs, running ones first (they keep their type),
   then by arrival, are admitted while they fit in the team's own guarantee. Each gets
   a GPU type (Kueue's flavour): where it runs, else its fastest type with room.
2. **Borrowing.** Every job left, of every team, in one order: running jobs of teams
   that may not be preempted, then running jobs oldest start first, then queued jobs by
   arrival. A job is admitted if the GPUs are free, its team stays within
   ``borrow_limit``, and (``gpus`` quotas) the borrowable pool has room: capacity no
   guarantee covers plus what the lenders leave idle up to their ``lend_limit``. So a
   lender's new job (step 1) comes before every borrower, and the borrowers that no
   longer fit are the newest: those are preempted.
3. **Flexible workers.** Admitted elastic jobs may grow past their minimum, first within
   their team's own guarantee, then borrowing on the same terms; they come last, so when
   a lender submits, borrowers' elastic jobs shrink before any borrowed job is
   preempted. Spare inference servers (those serving's demand leaves, lent or not)
   belong to no team: their GPUs go to elastic jobs only, teams with the least use per
   unit of weight first, and count against no quota or limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView
from lyra_ray.model.team_accounting import job_cost
from lyra_ray.model.teams import Amounts, Team, TeamSet
from lyra_ray.policies.teams.bounds import own_training, view_factors

QUOTA = "quota"
"""The waiting code of a job its team's quota keeps out (:mod:`lyra_ray.scheduling.waiting`)."""


@dataclass
class Admission:
    """The answer: admitted jobs' GPU type and worker cap; why the others wait."""

    gpu_type: dict[JobId, GpuType] = field(default_factory=dict)
    max_workers: dict[JobId, int] = field(default_factory=dict)
    team: dict[JobId, str] = field(default_factory=dict)
    borrowed: set[JobId] = field(default_factory=set)
    waiting: dict[JobId, tuple[str, str]] = field(default_factory=dict)


class _Ledger:
    """Running totals while jobs are admitted (GPUs free per type, each team's use)."""

    def __init__(self, snap: ClusterSnapshot, teams: TeamSet) -> None:
        self.snap, self.teams = snap, teams
        self.unit = teams.unit  # a property over every team: read once, not per job
        self.cap = snap.gpus_by_type()  # a walk over every node: once per decision
        self.reference = teams.reference_for(own_training(snap))
        self.factors = (
            view_factors(snap, snap.active_jobs, self.cap, self.reference)
            if self.unit == "effective"
            else {}
        )
        self.free: dict[GpuType, float] = {g: float(n) for g, n in self.cap.items()}
        self.used: dict[str, Amounts] = {name: {} for name in teams.teams}
        self.borrowed: dict[str, float] = {name: 0.0 for name in teams.teams}
        self.pool: Amounts = {}

    def cost(self, job: JobView, gpu_type: GpuType, workers: int) -> tuple[str, float]:
        t = self.snap.throughput_model
        return job_cost(job.spec, gpu_type, workers, t, self.unit, self.reference, self.factors)

    def own_room(self, team: Team, key: str) -> float:
        if not team.limited:
            return 0.0
        return team.guarantee().get(key, 0.0) - self.used[team.name].get(key, 0.0)

    def borrow_room(self, team: Team, key: str) -> float:
        limit = math.inf if team.borrow_limit is None else team.borrow_limit
        room = limit - self.borrowed[team.name]
        if self.unit == "gpus":
            room = min(room, self.pool.get(key, 0.0))
        return room

    def take(self, team: Team, gpu_type: GpuType, workers: int, key: str, amount: float) -> None:
        own = max(0.0, min(amount, self.own_room(team, key)))
        lent = amount - own
        self.free[gpu_type] -= workers
        self.used[team.name][key] = self.used[team.name].get(key, 0.0) + amount
        if lent > 0:
            self.borrowed[team.name] += lent
            if key in self.pool:
                self.pool[key] -= lent

    def open_pool(self) -> None:
        """After step 1: capacity no guarantee covers, plus idle guarantees to lend."""
        if self.unit != "gpus":
            return
        for g, n in self.cap.items():
            covered = sum(t.guarantee().get(g, 0.0) for t in self.teams.teams.values())
            self.pool[g] = max(0.0, n - covered)
        for t in self.teams.teams.values():
            if not t.limited:
                continue
            idle = {
                k: max(0.0, v - self.used[t.name].get(k, 0.0)) for k, v in t.guarantee().items()
            }
            total = sum(idle.values())
            scale = 1.0 if t.lend_limit is None or total <= t.lend_limit else t.lend_limit / total
            for k, v in idle.items():
                self.pool[k] = self.pool.get(k, 0.0) + v * scale


def _types(job: JobView, snap: ClusterSnapshot, cap: Mapping[GpuType, int]) -> list[GpuType]:
    """Where a job may go (``cap``: the training pool's GPUs by type): its current type
    first, then fastest first."""
    need = job.spec.min_workers
    rates = [(snap.throughput(job, g, need), g) for g in sorted(cap) if cap[g] >= need]
    order = [g for r, g in sorted(rates, key=lambda x: (-x[0], x[1])) if r > 0]
    if job.current is not None and job.current.gpu_type in order:
        order.remove(job.current.gpu_type)
        order.insert(0, job.current.gpu_type)
    return order


def _running_key(j: JobView) -> tuple[float, float, str]:
    return (j.first_start_s if j.first_start_s is not None else j.arrival_s, j.arrival_s, j.id)


def admit(
    snap: ClusterSnapshot, teams: TeamSet, spare_inference: Mapping[GpuType, int]
) -> Admission:
    """Admit the snapshot's active jobs by team (module docstring: steps 1-3)."""
    out = Admission()
    led = _Ledger(snap, teams)
    jobs = list(snap.active_jobs)
    team_of = {j.id: teams.team_of(j.spec) for j in jobs}
    out.team.update(team_of)
    kinds = {j.id: _types(j, snap, led.cap) for j in jobs}
    ordered = sorted(
        jobs,
        key=lambda j: (
            j.current is None,
            *(_running_key(j) if j.current else (j.arrival_s, 0.0, j.id)),
        ),
    )
    for j in ordered:  # 0: what runs for a team that may not be preempted stays
        team = teams.teams[team_of[j.id]]
        if (
            team.preemptible
            or j.current is None
            or j.spec.min_workers > led.free.get(g := j.current.gpu_type, 0.0)
        ):
            continue
        key, amount = led.cost(j, g, j.spec.min_workers)
        led.take(team, g, j.spec.min_workers, key, amount)
        out.gpu_type[j.id] = g
    for j in ordered:  # 1: guarantees
        team = teams.teams[team_of[j.id]]
        if not team.limited or j.id in out.gpu_type:
            continue
        for g in kinds[j.id]:
            key, amount = led.cost(j, g, j.spec.min_workers)
            if (
                led.free.get(g, 0.0) >= j.spec.min_workers
                and amount <= led.own_room(team, key) + 1e-9
            ):
                led.take(team, g, j.spec.min_workers, key, amount)
                out.gpu_type[j.id] = g
                break
    led.open_pool()
    rest = [j for j in jobs if j.id not in out.gpu_type]
    rest.sort(
        key=lambda j: (
            j.current is None,
            teams.teams[team_of[j.id]].preemptible if j.current else True,
            *(_running_key(j) if j.current else (j.arrival_s, 0.0, j.id)),
        )
    )
    for j in rest:  # 2: borrowing
        team = teams.teams[team_of[j.id]]
        for g in kinds[j.id]:
            key, amount = led.cost(j, g, j.spec.min_workers)
            room = led.own_room(team, key) + led.borrow_room(team, key)
            if led.free.get(g, 0.0) >= j.spec.min_workers and amount <= room + 1e-9:
                led.take(team, g, j.spec.min_workers, key, amount)
                out.gpu_type[j.id] = g
                out.borrowed.add(j.id)
                break
        else:
            out.waiting[j.id] = (QUOTA, _why(j, team, led, kinds[j.id]))
    _flexible(snap, teams, led, out, jobs, spare_inference)
    return out


def _flexible(
    snap: ClusterSnapshot,
    teams: TeamSet,
    led: _Ledger,
    out: Admission,
    jobs: list[JobView],
    spare_inference: Mapping[GpuType, int],
) -> None:
    """Step 3: each admitted elastic job's worker cap."""
    elastic = [j for j in jobs if j.id in out.gpu_type and j.spec.elastic]
    for j in jobs:
        if j.id in out.gpu_type and not j.spec.elastic:
            out.max_workers[j.id] = j.spec.min_workers
    elastic.sort(key=lambda j: (j.id in out.borrowed, j.arrival_s, j.id))
    grant: dict[JobId, int] = {}
    for borrowing in (False, True):  # own guarantee first, then borrowed
        for j in elastic:
            team = teams.teams[out.team[j.id]]
            g = out.gpu_type[j.id]
            have = j.spec.min_workers + grant.get(j.id, 0)
            want = j.spec.max_workers - have
            key, unit_cost = led.cost(j, g, 1)
            room = led.own_room(team, key) + (led.borrow_room(team, key) if borrowing else 0.0)
            k = min(want, int(led.free.get(g, 0.0)))
            if unit_cost > 0:
                k = min(k, int((room + 1e-9) // unit_cost))
            if k > 0:
                led.take(team, g, k, key, k * unit_cost)
                grant[j.id] = grant.get(j.id, 0) + k
    spare = dict(spare_inference)
    weights = teams.weights()

    def share(j: JobView) -> tuple[float, float, str]:
        used = sum(led.used[out.team[j.id]].values())
        return (used / weights.get(out.team[j.id], 1.0), j.arrival_s, j.id)

    for j in sorted(elastic, key=share):  # unowned inference servers
        g = out.gpu_type[j.id]
        want = j.spec.max_workers - j.spec.min_workers - grant.get(j.id, 0)
        k = min(want, spare.get(g, 0))
        if k > 0:
            spare[g] -= k
            grant[j.id] = grant.get(j.id, 0) + k
    for j in elastic:
        out.max_workers[j.id] = j.spec.min_workers + grant.get(j.id, 0)


def _why(j: JobView, team: Team, led: _Ledger, kinds: list[GpuType]) -> str:
    if not kinds:
        return f"team {team.name}: no GPU type fits {j.spec.min_workers} workers"
    g = kinds[0]
    key, amount = led.cost(j, g, j.spec.min_workers)
    if not team.limited:
        return (
            f"team {team.name} has no guarantee and the GPUs other teams' guarantees "
            f"leave are in use (needs {amount:g} {key})"
        )
    guar = team.guarantee().get(key, 0.0)
    used = led.used[team.name].get(key, 0.0)
    return (
        f"waits for team {team.name}'s quota: needs {amount:g} {key}, the team uses "
        f"{used:g} of a {guar:g} guarantee and borrows {led.borrowed[team.name]:g}"
        + ("" if team.borrow_limit is None else f" (limit {team.borrow_limit:g})")
    )
