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
their team's bound. ``enforce: pin`` in the team set keeps the path before issue #42
instead (admit each job onto one type, pin it there: :mod:`.pinned`), for comparison.

With no limited team the wrapper hands the snapshot through unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobView
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
    waiting: dict[JobId, tuple[str, str]] = field(default_factory=dict)


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

    def to_state(self) -> dict[str, Any]:
        return self.inner.to_state()

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.inner.load_state(state)

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        if not self.teams.any_limited:
            return self.inner.allocate(snap)
        if self.teams.enforce == "pin":
            alloc, adm = allocate_pinned(self.inner, self.teams, snap)
            self.last = Enforced(solves=1, admission=adm, waiting=dict(adm.waiting))
            return alloc
        return self._inside(snap)

    def _inside(self, snap: ClusterSnapshot) -> Allocation:
        claims = claim(snap, self.teams)
        bounds = dataclasses.replace(claims.bounds(pool_capacity(snap)), strict=True)
        base = dataclasses.replace(snap, team_bounds=bounds, entity_weights=self.teams.weights())
        saved = self.inner.to_state()
        alloc = self.inner.allocate(base)
        if alloc.lend - snap.lent_nodes:  # servers lent now: capacity no guarantee covers
            more = claims.bounds(pool_capacity(snap, alloc.lend))
            bounds = dataclasses.replace(more, strict=True)
            base = dataclasses.replace(base, team_bounds=bounds)
        sf = sizes(snap)
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
        bound = bool(rows) or over or _any_wait(alloc, snap)
        waiting = quota_reasons(alloc, snap, bounds, self.teams) if bound else {}
        self.last = Enforced(bounds, tuple(rows), solves, over, None, waiting)
        if not waiting:
            return alloc
        return dataclasses.replace(alloc, waiting={**waiting, **alloc.waiting})


def _broken(alloc: Allocation, bounds: TeamBounds, sf: Mapping[JobId, int]) -> list[QuotaRow]:
    """The rows an answer breaks. Floors count for time fractions only: a worker-count
    policy grants in its own order through the ledger and has no rows to take."""
    return bounds.violated(bounds.tally(uses(alloc, sf)), floors=bool(alloc.fractions))


def _any_wait(alloc: Allocation, snap: ClusterSnapshot) -> bool:
    """Whether a worker-count answer leaves an active job without GPUs (the ledger may be
    why); time fractions give every job something unless a row was added."""
    return bool(alloc.workers) and len(alloc.workers) < len(snap.active_jobs)


def _held(alloc: Allocation) -> set[JobId]:
    held = set(alloc.workers)
    for key, row in alloc.fractions.items():
        if any(x > 0 for x in row.values()):
            held.update(key.split("+"))
    return held


def quota_reasons(
    alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds, teams: TeamSet
) -> dict[JobId, tuple[str, str]]:
    """Why each active job the answer leaves without GPUs waits, where its team's bounds
    would not let it start on any type it runs on (its fastest first)."""
    ledger = Ledger(bounds, book=False)
    for jid, g, gpus in uses(alloc, sizes(snap)):
        ledger.take(jid, g, gpus)
    held = _held(alloc)
    cap = pool_capacity(snap, alloc.lend)
    out: dict[JobId, tuple[str, str]] = {}
    memo: dict[tuple[str, int, tuple[GpuType, ...]], str | None] = {}
    for j in snap.active_jobs:
        if j.id in held:
            continue
        team = bounds.team(j.id, teams.team_of(j.spec))
        types = _runnable(j, snap, cap)
        key = (team, j.spec.min_workers, types)
        if key not in memo:
            memo[key] = _why(j, team, types, ledger, bounds)
        why = memo[key]
        if why is not None:
            out[j.id] = (QUOTA, why)
    return out


def _runnable(j: JobView, snap: ClusterSnapshot, cap: Mapping[GpuType, int]) -> tuple[str, ...]:
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
    left, tight = ledger.guard_room(team, g)
    if tight is not None and left < units - 1e-9:
        row = bounds.guards[tight]
        return (
            f"waits for team {team}'s quota: needs {what}, and team {row.team}'s guarantee "
            f"keeps {bounds.reserved.get(row.team, {}).get(next(iter(row.types or {'*'})), 0):g}"
            f" for it: the other teams may hold {row.rhs:g} and hold {ledger.lhs[tight]:g}"
        )
    return f"waits for team {team}'s quota: needs {what}"
