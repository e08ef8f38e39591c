"""``teams(<inner>)``: any policy, made to respect teams' quotas, with the same signature.

The quotas are bounds *inside* the inner policy's own allocation: the wrapper turns the
teams' guarantees, borrowing and lending into a few rows (:mod:`lyra_ray.policies.teams.
bounds`) and hands them to the inner policy in the snapshot (``team_bounds``), every job
still in it with every GPU type it can run on. A heterogeneity-aware policy keeps
choosing each job's types and pairs relative to every other job; the rows only cap what a
team holds. The snapshot's ``entity_weights`` carry the teams' weights and each job's
entity is its team, so Gavel's hierarchical policy shares between teams by weight.

How the rows are handed over (one decision):

1. The inner policy is called once with the bounds and no LP rows. A greedy policy
   (Lyra, ``fifo_perf``, ``fifo_nonpreemptive``) checks each grant against them already
   (``strict``: :class:`lyra_ray.model.team_bounds.Ledger`), so its answer is final; and
   it is exactly its answer without teams wherever no bound refused a grant.
2. An LP's answer is checked against every row. If it breaks none it is the answer, the
   very allocation the policy gives without teams. Otherwise the broken rows join the LP
   and it is solved again (its saved state restored first), until no row is broken: each
   LP then has the fewest rows that bind.
3. A policy that takes no bounds (closed-form splits, a user's ``module:Class``) is cut
   to them last (:func:`lyra_ray.policies.teams.fit.fit`).

Jobs the bounds keep without GPUs wait with the code ``quota`` and a sentence naming
their team's bound (derived when someone asks: :meth:`TeamPolicy.waiting`). ``enforce:
pin`` in the team set keeps the path before issue #42 instead (admit each job onto one
type, pin it there: :mod:`.pinned`), for comparison.

With no limited team the wrapper hands the snapshot through unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobSpec, JobView
from lyra_ray.model.team_bounds import Ledger, QuotaRow, TeamBounds
from lyra_ray.model.teams import TeamSet
from lyra_ray.policies.base import Policy, PolicyBase
from lyra_ray.policies.teams.admission import QUOTA, Admission
from lyra_ray.policies.teams.bounds import claim, pool_capacity
from lyra_ray.policies.teams.fit import fit, sizes, uses
from lyra_ray.policies.teams.pinned import allocate_pinned
from lyra_ray.policies.teams.reach import closed_teams

log = logging.getLogger(__name__)

MAX_SOLVES = 8
"""Calls of the inner policy per decision at most: each adds the rows the last answer
broke; there are a few rows per team, and in practice one or two re-solves suffice."""


@dataclass
class Enforced:
    """What the last decision did (for status views, tests and benchmarks; not state)."""

    bounds: TeamBounds | None = None
    rows: tuple[QuotaRow, ...] = ()
    """The rows that joined the inner LP (none where the first answer respected all)."""
    solves: int = 0
    fitted: bool = False
    """Whether the answer had to be cut to the bounds (a policy that takes no bounds)."""
    admission: Admission | None = None
    """``enforce: pin`` only: the admission."""


def with_teams(inner: Policy, teams: TeamSet) -> TeamPolicy:
    """``inner`` inside the teams wrapper, keeping the inner policy's round quirks (class
    variables of the :class:`Policy` protocol, hence a subclass per inner class)."""
    cls: type[TeamPolicy] = type(
        f"TeamPolicy[{type(inner).__name__}]",
        (TeamPolicy,),
        {
            "shuffle_round_types": inner.shuffle_round_types,
            "round_skip_zero_priority": inner.round_skip_zero_priority,
        },
    )
    return cls(inner, teams)


class TeamPolicy(PolicyBase):
    """Teams' quotas around ``inner`` (module docstring); build it with
    :func:`with_teams`, which carries the inner policy's round quirks over."""

    name: ClassVar[str] = "teams"

    def __init__(self, inner: Policy, teams: TeamSet) -> None:
        self.inner = inner
        self.teams = teams
        self.last = Enforced()
        """The last decision's enforcement (not state: it is recomputed)."""
        self._reasons = QuotaReasons()
        self._team_cache: dict[JobId, tuple[JobSpec, str]] = {}
        self._team_version: tuple[int, int, int] | None = None

    def to_state(self) -> dict[str, Any]:
        return self.inner.to_state()

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.inner.load_state(state)

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        if not self.teams.any_limited:
            return self.inner.allocate(snap)
        if self.teams.enforce == "pin":
            alloc, adm = allocate_pinned(self.inner, self.teams, snap)
            self.last = Enforced(solves=1, admission=adm)
            return alloc
        return self._inside(snap)

    def _team_map(self, active: tuple[JobView, ...]) -> dict[JobId, str]:
        """Each active job's team, kept across decisions per spec object: a job's team
        is fixed once it is submitted, so only new jobs (or a changed team set) are
        looked up; 10,000 queued jobs are not resolved again at every decision."""
        t = self.teams
        version = (id(t.teams), id(t.users), id(t.jobs))
        if version != self._team_version:
            self._team_cache, self._team_version = {}, version
        cache = self._team_cache
        out: dict[JobId, str] = {}
        fresh: dict[JobId, tuple[JobSpec, str]] = {}
        for j in active:
            hit = cache.get(j.id)
            team = hit[1] if hit is not None and hit[0] is j.spec else t.team_of(j.spec)
            fresh[j.id] = (j.spec, team)
            out[j.id] = team
        self._team_cache = fresh
        return out

    def _inside(self, snap: ClusterSnapshot) -> Allocation:
        active = snap.active_jobs  # a tuple built per call: once per decision here
        claims = claim(snap, self.teams, active, self._team_map(active))
        bounds = dataclasses.replace(claims.bounds(pool_capacity(snap)), strict=True)
        base = dataclasses.replace(snap, team_bounds=bounds, entity_weights=self.teams.weights())
        saved = self.inner.to_state()
        alloc = self.inner.allocate(base)
        if alloc.lend - snap.lent_nodes:  # servers lent now: capacity no guarantee covers
            more = claims.bounds(pool_capacity(snap, alloc.lend))
            bounds = dataclasses.replace(more, strict=True)
            base = dataclasses.replace(base, team_bounds=bounds)
        sf = sizes(snap, active)
        bad = _broken(alloc, bounds, sf)
        rows: list[QuotaRow] = []
        closed: frozenset[str] | None = None
        solves = 1
        while bad and solves < MAX_SOLVES:
            new = [r for r in bad if r not in rows]
            if not new:  # it ignores rows it was given: cut it below
                break
            rows.extend(new)
            self.inner.load_state(saved)
            if closed is None:
                closed = closed_teams(snap, bounds, pool_capacity(snap, alloc.lend))
            shut = dataclasses.replace(bounds, rows=tuple(rows), closed=closed)
            ask = dataclasses.replace(base, team_bounds=shut)
            try:
                again = self.inner.allocate(ask)
            except (RuntimeError, ValueError) as e:  # a solver's failure: keep the last answer
                log.warning("teams: the policy failed with %d quota rows (%s)", len(rows), e)
                self.inner.load_state(saved)
                alloc = self.inner.allocate(base)
                break
            solves += 1
            alloc, bad = again, _broken(again, bounds, sf)
        over = bool(bounds.violated(bounds.tally(uses(alloc, sf)), floors=False))
        if over:
            alloc = fit(alloc, snap, bounds)
        self.last = Enforced(bounds, tuple(rows), solves, over)
        return alloc

    def waiting(self, snap: ClusterSnapshot, alloc: Allocation) -> Mapping[JobId, tuple[str, str]]:
        """The inner policy's own reasons and, under quotas, the ``quota`` reason of each
        job the bounds keep out: recomputed from ``snap`` when asked (the bounds keep no
        state), not carried in every answer."""
        own = self.inner.waiting(snap, alloc)
        if not self.teams.any_limited or self.teams.enforce == "pin":
            return own
        active = snap.active_jobs
        team_of = self._team_map(active)
        bounds = claim(snap, self.teams, active, team_of).bounds(pool_capacity(snap, alloc.lend))
        quota = self._reasons.reasons(alloc, snap, bounds, active, sizes(snap, active))
        return {**quota, **own}


def _broken(alloc: Allocation, bounds: TeamBounds, sf: Mapping[JobId, int]) -> list[QuotaRow]:
    """The rows an answer breaks. Floors count for time fractions only: a worker-count
    policy grants in its own order through the ledger and has no rows to take."""
    return bounds.violated(bounds.tally(uses(alloc, sf)), floors=bool(alloc.fractions))


def _held(alloc: Allocation) -> set[JobId]:
    held = set(alloc.workers)
    for key, row in alloc.fractions.items():
        if any(x > 0 for x in row.values()):
            held.update(key.split("+"))
    return held


Pool = tuple[tuple[GpuType, int], ...]


class QuotaReasons:
    """Why each active job an answer leaves without GPUs waits, where its team's bounds
    would not let it start on any type it runs on (its fastest first). The types a job
    runs on are kept per job view (a view is rebuilt whenever the job changes), so a queue
    of 10,000 jobs is not re-sorted by speed at every decision."""

    def __init__(self) -> None:
        self._types: dict[JobId, tuple[JobView, Pool, tuple[GpuType, ...]]] = {}

    def reasons(
        self,
        alloc: Allocation,
        snap: ClusterSnapshot,
        bounds: TeamBounds,
        active: tuple[JobView, ...],
        sf: Mapping[JobId, int],
    ) -> dict[JobId, tuple[str, str]]:
        ledger = Ledger(bounds, book=False)
        for jid, g, gpus in uses(alloc, sf):
            ledger.take(jid, g, gpus)
        held = _held(alloc)
        cap = pool_capacity(snap, alloc.lend)
        pool = tuple(sorted(cap.items()))
        out: dict[JobId, tuple[str, str]] = {}
        memo: dict[tuple[str, int, tuple[GpuType, ...]], str | None] = {}
        fresh: dict[JobId, tuple[JobView, Pool, tuple[GpuType, ...]]] = {}
        for j in active:
            if j.id in held:
                continue
            hit = self._types.get(j.id)
            types = hit[2] if hit is not None and hit[0] is j and hit[1] == pool else None
            if types is None:
                types = _runnable(j, snap, cap)
            fresh[j.id] = (j, pool, types)
            team = bounds.team_of.get(j.id) or j.spec.user
            key = (team, j.spec.min_workers, types)
            if key not in memo or bounds.effective:
                memo[key] = _why(j, team, types, ledger, bounds)
            why = memo[key]
            if why is not None:
                out[j.id] = (QUOTA, why)
        self._types = fresh
        return out


def quota_reasons(
    alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds, teams: TeamSet
) -> dict[JobId, tuple[str, str]]:
    """:meth:`QuotaReasons.reasons` once (for callers outside a decision)."""
    active = snap.active_jobs
    return QuotaReasons().reasons(alloc, snap, bounds, active, sizes(snap, active))


def _runnable(j: JobView, snap: ClusterSnapshot, cap: Mapping[GpuType, int]) -> tuple[str, ...]:
    """The types ``j`` runs on (its minimum fits, a rate there), fastest first."""
    need = j.spec.min_workers
    row = j.throughput
    rates = []
    for g, n in cap.items():
        if n < need:
            continue
        r = row.get(g)
        if r is None:
            r = snap.throughput(j, g)
        if r > 0:
            rates.append((-r, g))
    return tuple(g for _, g in sorted(rates))


def _why(
    j: JobView, team: str, types: tuple[str, ...], ledger: Ledger, bounds: TeamBounds
) -> str | None:
    """The sentence for a job its team's bounds keep out, ``None`` if they do not."""
    need = j.spec.min_workers
    if not types or any(ledger.fits(j.id, g, need) for g in types):
        return None
    g = types[0]
    units = need * bounds.weight(j.id, g)
    what = f"{units:.3g} reference units" if bounds.effective else f"{need} {g}"
    lim = bounds.limits.get(team)
    if lim is not None and ledger.limit_room(team, g) < units - 1e-9:
        use = ledger.use.get(team, {})
        used = sum(use.values()) if bounds.effective else use.get(g, 0.0)
        guar = lim.guarantee.get("*", 0.0) if bounds.effective else lim.guarantee.get(g, 0.0)
        return (
            f"waits for team {team}'s quota: needs {what}, the team uses {used:g} of a "
            f"{guar:g} guarantee and borrows {ledger.borrowed(team):g} "
            f"(limit {lim.borrow_limit:g})"
        )
    if ledger.share_room(team, g) < units - 1e-9:
        k = bounds.key(g)
        held = {t: r.get(k, 0.0) for t, r in bounds.reserved.items() if t != team}
        named = ", ".join(f"{t} {v:g}" for t, v in sorted(held.items()) if v > 0)
        where = "reference units" if bounds.effective else f"{g} GPUs"
        return (
            f"waits for team {team}'s quota: needs {what}; of the {bounds.capacity.get(k, 0):g} "
            f"{where}, other teams' guarantees reserve {sum(held.values()):g} ({named or '-'})"
            " and the rest is in use"
        )
    return f"waits for team {team}'s quota: needs {what}"
