"""Team quotas as bounds on an allocation: what a policy reads to respect teams' quotas.

The teams wrapper (:mod:`lyra_ray.policies.teams`) turns the teams' guarantees, borrowing
and lending limits into bounds over what jobs use, and hands them to the inner policy in
the snapshot (``ClusterSnapshot.team_bounds``). The policy keeps choosing GPU types,
pairs and worker counts itself; the bounds only say how much each team may hold.

Each team *reserves* part of each GPU type (what its jobs' minimums claim of its
guarantee, plus the part of its idle guarantee it may not lend); the rest of the
capacity is shared. The one rule, per GPU type (or, for ``effective`` quotas, over every
type in reference units)::

    sum over teams t of max(use_t, reserved_t)  <=  capacity

A team within its reservation may always take it; a team beyond it borrows from what no
reservation holds. As linear rows, one per set ``S`` of teams (those beyond their
reservation): ``sum_{t in S} use_t <= capacity - sum_{t not in S} reserved_t`` (a
*share* row). Then:

* **floor** rows give a team what its demand claims: its own use, over all types, is at
  least its claim. The share rows only keep others off a reservation; an objective that
  trades one team against another (max-min fairness over every job) would otherwise
  leave a guaranteed team short to lift a team with no guarantee;
* **limit** rows keep a team within its ``borrow_limit``: what it uses beyond its
  guarantee, summed over types, is at most the limit; as rows over GPUs, one per set of
  types ``K``, ``sum_{k in K} use_k <= sum_{k in K} guarantee_k + limit``.

An LP policy adds :attr:`TeamBounds.rows` to its constraints (a floor row enters as
``-use <= -claim``); the wrapper adds only the rows an answer broke and solves again, so
an LP carries the few rows that bind (the set of a share or limit row is the one the
answer broke most: those beyond their reservation, the types borrowed). A greedy policy,
which grants workers one job at a time, checks each grant with a :class:`Ledger` when
:attr:`TeamBounds.strict` is set: the share rule and the borrow limits, exactly (a
greedy policy meets the floors by its order: the running jobs the bounds keep, then the
rest; a lender's claim is room no one else may take).

WHY this module imports nothing of the model: :mod:`lyra_ray.model.types` holds the
snapshot that carries these bounds, so it imports this module, not the reverse. GPU types
and job ids are plain strings here, as they are there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

TOLERANCE = 1e-6
"""GPUs (or reference units), relative to the bound where that is larger, by which an
answer may exceed a row and still respect it: an LP's answer meets its rows to about
1e-8, and a fraction of a millionth of a GPU is no use to anyone."""

ALL = "*"
"""The key of effective amounts: every GPU type at once, in reference units."""

RowKind = Literal["share", "floor", "limit"]


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """``sum of the use of the teams in `teams` on `types` <= rhs`` (``>= rhs`` for a
    floor); ``types`` ``None``: every type, in reference units."""

    teams: frozenset[str]
    types: frozenset[str] | None
    rhs: float
    kind: RowKind = "share"

    @property
    def floor(self) -> bool:
        return self.kind == "floor"

    def counts(self, team: str) -> bool:
        return team in self.teams

    def counts_type(self, gpu_type: str) -> bool:
        return self.types is None or gpu_type in self.types

    def broken(self, lhs: float) -> bool:
        tol = TOLERANCE * max(1.0, abs(self.rhs))
        return lhs < self.rhs - tol if self.floor else lhs > self.rhs + tol

    def describe(self) -> str:
        where = "reference units" if self.types is None else ", ".join(sorted(self.types))
        who = ", ".join(sorted(self.teams))
        if self.kind == "floor":
            return f"team {who} is owed {self.rhs:g} of {where} (what its jobs claim)"
        if self.kind == "limit":
            return f"team {who} may use at most {self.rhs:g} of {where} (its borrow limit)"
        return f"teams {who} may share {self.rhs:g} of {where} (the rest is reserved)"


@dataclass(frozen=True, slots=True)
class Limit:
    """A team's guarantee (by GPU type, or ``{"*": units}`` for effective quotas) and its
    borrow limit."""

    guarantee: Mapping[str, float]
    borrow_limit: float


Tally = dict[str, dict[str, float]]
"""team -> GPU type -> use (GPUs, or reference units for effective quotas)."""


@dataclass(frozen=True)
class TeamBounds:
    """The teams' quotas as bounds over what jobs use (module docstring)."""

    team_of: Mapping[str, str]
    """Job id -> its team (every active job)."""
    capacity: Mapping[str, float]
    """GPUs per type (``"*"``: reference units for effective quotas) the bounds share."""
    reserved: Mapping[str, Mapping[str, float]]
    """Team -> type (``"*"``) -> what it reserves (its claims and what it may not lend)."""
    limits: Mapping[str, Limit] = field(default_factory=dict)
    floors: tuple[QuotaRow, ...] = ()
    effective: bool = False
    per_gpu: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Effective quotas: job id -> GPU type -> reference units one GPU is worth to it."""
    rows: tuple[QuotaRow, ...] = ()
    """The rows an LP adds to its constraints in this call."""
    strict: bool = False
    """Whether a greedy policy checks each grant (:class:`Ledger`) (the wrapper sets it)."""
    closed: frozenset[str] = frozenset()
    """Teams the rows leave no GPU (set with :attr:`rows`): an LP takes their jobs out
    of its objective, as jobs that can run nowhere (:mod:`lyra_ray.policies.teams.reach`)."""
    keep: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """Running jobs whose minimum (on their type) the bounds keep, oldest start first
    while they fit: a :class:`Ledger` books them before any grant, so a greedy policy
    that orders running jobs its own way still drops the newest borrowers first."""

    def team(self, job_id: str, default: str) -> str:
        return self.team_of.get(job_id, default)

    def key(self, gpu_type: str) -> str:
        """The amount a GPU of ``gpu_type`` counts in: its type, or ``"*"``."""
        return ALL if self.effective else gpu_type

    def weight(self, job_id: str, gpu_type: str) -> float:
        """What one GPU of ``gpu_type`` counts for ``job_id``'s team (1 for GPU quotas)."""
        if not self.effective:
            return 1.0
        return self.per_gpu.get(job_id, {}).get(gpu_type, 1.0)

    def tally(self, uses: Iterable[tuple[str, str, float]]) -> Tally:
        """Each team's use per GPU type from ``(job id, GPU type, GPUs)``."""
        out: Tally = {}
        for jid, g, gpus in uses:
            if gpus <= 0:
                continue
            team = self.team_of.get(jid)
            if team is None:
                continue
            row = out.setdefault(team, {})
            row[g] = row.get(g, 0.0) + gpus * self.weight(jid, g)
        return out

    @staticmethod
    def lhs(row: QuotaRow, tally: Tally) -> float:
        return sum(
            v for team, use in tally.items() if row.counts(team)
            for g, v in use.items() if row.counts_type(g)
        )  # fmt: skip

    def held(self, tally: Tally, team: str, key: str) -> float:
        """``team``'s use counted against ``key`` (a type, or every type for ``"*"``)."""
        use = tally.get(team, {})
        return sum(use.values()) if key == ALL else use.get(key, 0.0)

    def share_row(self, teams: Iterable[str], key: str) -> QuotaRow:
        """The share row of ``teams`` (those beyond their reservation) on ``key``."""
        s = frozenset(teams)
        rest = sum(r.get(key, 0.0) for t, r in self.reserved.items() if t not in s)
        types = None if key == ALL else frozenset([key])
        return QuotaRow(s, types, self.capacity.get(key, 0.0) - rest)

    def limit_row(self, team: str, types: Iterable[str] | None) -> QuotaRow:
        """The borrow-limit row of ``team`` over ``types`` (``None``: effective units)."""
        lim = self.limits[team]
        if types is None or self.effective:
            rhs = lim.guarantee.get(ALL, 0.0) + lim.borrow_limit
            return QuotaRow(frozenset([team]), None, rhs, "limit")
        s = frozenset(types)
        rhs = sum(lim.guarantee.get(k, 0.0) for k in s) + lim.borrow_limit
        return QuotaRow(frozenset([team]), s, rhs, "limit")

    def violated(self, tally: Tally, floors: bool = True) -> list[QuotaRow]:
        """For each type the share row ``tally`` breaks most (the teams beyond their
        reservation there), the floors it leaves short (unless ``floors`` is false: a cut
        can only lower use), and for each team over its borrow limit the row of the types
        it borrows."""
        out = []
        teams = set(tally) | set(self.reserved)
        for key in sorted(self.capacity):
            over = [
                t for t in sorted(teams)
                if self.held(tally, t, key) > self.reserved.get(t, {}).get(key, 0.0)
            ]  # fmt: skip
            rest = sum(r.get(key, 0.0) for t, r in self.reserved.items() if t not in over)
            if over and rest > 0:  # with nothing reserved by the rest it is the capacity
                row = self.share_row(over, key)  # row, the policy's own business
                if row.broken(self.lhs(row, tally)):
                    out.append(row)
        if floors:
            out += [r for r in self.floors if r.broken(self.lhs(r, tally))]
        for team, lim in sorted(self.limits.items()):
            use = tally.get(team, {})
            if self.effective:
                row = self.limit_row(team, None)
            else:
                borrowing = [g for g, v in use.items() if v > lim.guarantee.get(g, 0.0)]
                if not borrowing:
                    continue
                row = self.limit_row(team, borrowing)
            if row.broken(self.lhs(row, tally)):
                out.append(row)
        return out


class Ledger:
    """Grants checked one at a time against the share rule and the borrow limits,
    exactly (what a greedy policy uses when :attr:`TeamBounds.strict` is set)."""

    def __init__(self, bounds: TeamBounds, book: bool = True) -> None:
        """``book``: start with :attr:`TeamBounds.keep` booked (a policy's grants); a
        ledger that replays an answer's use starts empty."""
        self.b = bounds
        self.use: Tally = {}
        self.held: dict[tuple[str, str], float] = {}
        """(team, key) -> use counted against the key."""
        self.excess = {
            k: sum(r.get(k, 0.0) for r in bounds.reserved.values()) for k in bounds.capacity
        }
        """key -> sum over teams of max(use, reserved)."""
        self.booked: dict[str, tuple[str, float]] = {}
        if book:
            for jid, (g, n) in bounds.keep.items():
                self.take(jid, g, n)
                self.booked[jid] = (g, float(n))

    def borrowed(self, team: str) -> float:
        """What ``team`` holds beyond its guarantee (summed over types), as granted so far."""
        lim = self.b.limits.get(team)
        use = self.use.get(team, {})
        guarantee = lim.guarantee if lim is not None else {}
        if self.b.effective:
            return max(0.0, sum(use.values()) - guarantee.get(ALL, 0.0))
        return sum(max(0.0, v - guarantee.get(g, 0.0)) for g, v in use.items())

    def limit_room(self, team: str, gpu_type: str) -> float:
        """Units ``team`` may still take on ``gpu_type`` within its borrow limit."""
        lim = self.b.limits.get(team)
        if lim is None:
            return math.inf
        use = self.use.get(team, {})
        if self.b.effective:
            own = lim.guarantee.get(ALL, 0.0) - sum(use.values())
        else:
            own = lim.guarantee.get(gpu_type, 0.0) - use.get(gpu_type, 0.0)
        return max(0.0, own) + lim.borrow_limit - self.borrowed(team)

    def share_room(self, team: str, gpu_type: str) -> float:
        """Units ``team`` may still take on ``gpu_type`` under the share rule: what is left
        of its own reservation, plus what no reservation holds."""
        k = self.b.key(gpu_type)
        if k not in self.b.capacity:
            return math.inf  # a type the bounds do not count (none such in practice)
        mine = self.b.reserved.get(team, {}).get(k, 0.0)
        own = max(0.0, mine - self.held.get((team, k), 0.0))
        return own + self.b.capacity[k] - self.excess[k]

    def room(self, job_id: str, gpu_type: str, team: str | None = None) -> float:
        """How many more GPUs of ``gpu_type`` ``job_id``'s team may take (may be fractional
        or infinite)."""
        team = team if team is not None else self.b.team_of.get(job_id, "")
        w = self.b.weight(job_id, gpu_type)
        if w <= 0:
            return math.inf
        units = min(self.share_room(team, gpu_type), self.limit_room(team, gpu_type))
        return max(0.0, units) / w if math.isfinite(units) else math.inf

    def _unbooked(self, job_id: str, gpu_type: str, gpus: float) -> float:
        b = self.booked.get(job_id)
        return gpus if b is None or b[0] != gpu_type else max(0.0, gpus - b[1])

    def fits(self, job_id: str, gpu_type: str, gpus: float) -> bool:
        gpus = self._unbooked(job_id, gpu_type, gpus)
        return gpus <= 0 or gpus <= self.room(job_id, gpu_type) + 1e-9

    def take(self, job_id: str, gpu_type: str, gpus: float) -> None:
        b = self.booked.get(job_id)
        if b is not None and b[0] == gpu_type:
            used = min(gpus, b[1])
            self.booked[job_id] = (gpu_type, b[1] - used)
            gpus -= used
            if gpus <= 0:
                return
        elif b is not None and b[1] > 0:  # placed elsewhere: its booking is freed
            del self.booked[job_id]
            self._add(job_id, b[0], -b[1])
        self._add(job_id, gpu_type, gpus)

    def _add(self, job_id: str, gpu_type: str, gpus: float) -> None:
        team = self.b.team_of.get(job_id, "")
        units = gpus * self.b.weight(job_id, gpu_type)
        row = self.use.setdefault(team, {})
        row[gpu_type] = row.get(gpu_type, 0.0) + units
        k = self.b.key(gpu_type)
        if k in self.excess:
            mine = self.b.reserved.get(team, {}).get(k, 0.0)
            before = self.held.get((team, k), 0.0)
            self.held[team, k] = before + units
            self.excess[k] += max(before + units, mine) - max(before, mine)

    def whole(self, job_id: str, gpu_type: str, want: int) -> int:
        """The most of ``want`` GPUs that fit (whole GPUs)."""
        booked = want - self._unbooked(job_id, gpu_type, want)
        room = self.room(job_id, gpu_type) + booked
        if room >= want:
            return max(0, want)
        return max(0, math.floor(room + 1e-9))


def ledger_of(bounds: TeamBounds | None, book: bool = True) -> Ledger | None:
    """A ledger when ``bounds`` asks greedy policies to check their grants, else ``None``.
    ``book``: the policy grants running jobs first (then the running jobs the bounds keep
    are booked: :attr:`TeamBounds.keep`); a policy that places every job afresh in an
    order of its own books none (a booked job it then left out would hold GPUs no one
    uses)."""
    return Ledger(bounds, book) if bounds is not None and bounds.strict else None
