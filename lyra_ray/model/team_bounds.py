"""Team quotas as bounds on an allocation: what a policy reads to respect teams' quotas.

The teams wrapper (:mod:`lyra_ray.policies.teams`) turns the teams' guarantees, borrowing
and lending limits into a few linear rows over what jobs use, and hands them to the inner
policy inside the snapshot (``ClusterSnapshot.team_bounds``). The policy keeps choosing
GPU types, pairs and worker counts itself; the rows only bound how much each team may
hold. Three kinds of row (each over GPUs of some types, or over reference units of
effective throughput on every type for ``effective`` quotas):

* **guard** rows keep a team's guarantee for it: every *other* team's use of a type is at
  most the capacity left once the team's reservation (what its own demand fills of its
  guarantee, plus what it may not lend) is taken out;
* **floor** rows give a team what its demand claims of its guarantee: its own use, over
  all types, is at least its claim. A guard row alone only keeps others off; an
  objective that trades one team against another (max-min fairness over every job)
  would otherwise leave a guaranteed team short to lift a team with no guarantee;
* **limit** rows keep a team within its ``borrow_limit``: what it uses beyond its
  guarantee, summed over types, is at most the limit. As rows over GPUs that is one row
  per set ``S`` of types, ``sum_{k in S} use_k <= sum_{k in S} guarantee_k + limit``; the
  wrapper adds only the sets an answer broke, an LP then solves again.

An LP policy adds :attr:`TeamBounds.rows` to its constraints (nothing else; a floor row
enters as ``-use <= -claim``). A greedy policy, which grants workers one job at a time,
checks each grant with a :class:`Ledger` when :attr:`TeamBounds.strict` is set: every
guard row and the exact borrow limit (a greedy policy meets the floors by its order: the
running jobs the bounds keep, then the rest; a lender's claim is room a guard row keeps).

WHY this module imports nothing of the model: :mod:`lyra_ray.model.types` holds the
snapshot that carries these bounds, so it imports this module, not the reverse. GPU types
and job ids are plain strings here, as they are there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TOLERANCE = 1e-6
"""GPUs (or reference units), relative to the bound where that is larger, by which an
answer may exceed a row and still respect it: an LP's answer meets its rows to about
1e-8, and a fraction of a millionth of a GPU is no use to anyone."""


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """``sum of the use counted <= rhs`` (``>= rhs`` for a floor): the use of every team
    but ``team`` (a guard) or of ``team`` alone (a limit or a floor), on ``types``
    (``None``: every type, in reference units)."""

    team: str
    guard: bool
    types: frozenset[str] | None
    rhs: float
    floor: bool = False

    def counts(self, team: str) -> bool:
        return team != self.team if self.guard else team == self.team

    def counts_type(self, gpu_type: str) -> bool:
        return self.types is None or gpu_type in self.types

    def broken(self, lhs: float) -> bool:
        tol = TOLERANCE * max(1.0, abs(self.rhs))
        return lhs < self.rhs - tol if self.floor else lhs > self.rhs + tol

    def describe(self) -> str:
        where = "reference units" if self.types is None else ", ".join(sorted(self.types))
        if self.guard:
            return f"team {self.team}'s guarantee leaves the other teams {self.rhs:g} of {where}"
        if self.floor:
            return f"team {self.team} is owed {self.rhs:g} of {where} (what it claims)"
        return f"team {self.team} may use at most {self.rhs:g} of {where} (its borrow limit)"


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
    """The teams' quotas as rows over what jobs use (module docstring)."""

    team_of: Mapping[str, str]
    """Job id -> its team (every active job)."""
    guards: tuple[QuotaRow, ...]
    limits: Mapping[str, Limit]
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
    capacity: Mapping[str, float] = field(default_factory=dict)
    """GPUs per type (``"*"``: reference units) the guard rows were computed from."""
    reserved: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Each team's reservation per type (``"*"``: reference units)."""
    keep: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """Running jobs whose minimum (on their type) the bounds keep, oldest start first
    while they fit: a :class:`Ledger` books them before any grant, so a greedy policy
    that orders running jobs its own way still drops the newest borrowers first."""

    def team(self, job_id: str, default: str) -> str:
        return self.team_of.get(job_id, default)

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

    def limit_row(self, team: str, types: Iterable[str] | None) -> QuotaRow:
        """The borrow-limit row of ``team`` over ``types`` (``None``: effective units)."""
        lim = self.limits[team]
        if types is None or self.effective:
            return QuotaRow(team, False, None, lim.guarantee.get("*", 0.0) + lim.borrow_limit)
        s = frozenset(types)
        return QuotaRow(
            team, False, s, sum(lim.guarantee.get(k, 0.0) for k in s) + lim.borrow_limit
        )

    def violated(self, tally: Tally, floors: bool = True) -> list[QuotaRow]:
        """The guard rows ``tally`` breaks, the floors it leaves short (unless ``floors``
        is false: a cut can only lower use), and for each team over its borrow limit the
        row of the types it borrows (the most broken one)."""
        out = [r for r in self.guards if r.broken(self.lhs(r, tally))]
        if floors:
            out += [r for r in self.floors if r.broken(self.lhs(r, tally))]
        for team, lim in sorted(self.limits.items()):
            use = tally.get(team, {})
            if self.effective:
                row = self.limit_row(team, None)
            else:
                over = [g for g, v in use.items() if v > lim.guarantee.get(g, 0.0)]
                if not over:
                    continue
                row = self.limit_row(team, over)
            if row.broken(self.lhs(row, tally)):
                out.append(row)
        return out


class Ledger:
    """Grants checked one at a time against every guard row and the exact borrow limits
    (what a greedy policy uses when :attr:`TeamBounds.strict` is set)."""

    def __init__(self, bounds: TeamBounds, book: bool = True) -> None:
        """``book``: start with :attr:`TeamBounds.keep` booked (a policy's grants); a
        ledger that replays an answer's use starts empty."""
        self.b = bounds
        self.lhs = [0.0] * len(bounds.guards)
        self.use: Tally = {}
        self._rows: dict[tuple[str, str], list[int]] = {}
        self.booked: dict[str, tuple[str, float]] = {}
        if book:
            for jid, (g, n) in bounds.keep.items():
                self.take(jid, g, n)
                self.booked[jid] = (g, float(n))

    def _guards(self, team: str, gpu_type: str) -> list[int]:
        key = (team, gpu_type)
        hit = self._rows.get(key)
        if hit is None:
            hit = self._rows[key] = [
                i for i, r in enumerate(self.b.guards) if r.counts(team) and r.counts_type(gpu_type)
            ]
        return hit

    def borrowed(self, team: str) -> float:
        """What ``team`` holds beyond its guarantee (summed over types), as granted so far."""
        lim = self.b.limits.get(team)
        use = self.use.get(team, {})
        guarantee = lim.guarantee if lim is not None else {}
        if self.b.effective:
            return max(0.0, sum(use.values()) - guarantee.get("*", 0.0))
        return sum(max(0.0, v - guarantee.get(g, 0.0)) for g, v in use.items())

    def limit_room(self, team: str, gpu_type: str) -> float:
        """Units ``team`` may still take on ``gpu_type`` within its borrow limit."""
        lim = self.b.limits.get(team)
        if lim is None:
            return math.inf
        use = self.use.get(team, {})
        if self.b.effective:
            own = lim.guarantee.get("*", 0.0) - sum(use.values())
        else:
            own = lim.guarantee.get(gpu_type, 0.0) - use.get(gpu_type, 0.0)
        return max(0.0, own) + lim.borrow_limit - self.borrowed(team)

    def guard_room(self, team: str, gpu_type: str) -> tuple[float, int | None]:
        """Units ``team`` may still take on ``gpu_type`` within the other teams' guard rows,
        and the index of the tightest row (``None``: no row counts it)."""
        units, tight = math.inf, None
        for i in self._guards(team, gpu_type):
            left = self.b.guards[i].rhs - self.lhs[i]
            if left < units:
                units, tight = left, i
        return units, tight

    def room(self, job_id: str, gpu_type: str, team: str | None = None) -> float:
        """How many more GPUs of ``gpu_type`` ``job_id``'s team may take (may be fractional
        or infinite)."""
        team = team if team is not None else self.b.team_of.get(job_id, "")
        w = self.b.weight(job_id, gpu_type)
        if w <= 0:
            return math.inf
        units = min(self.guard_room(team, gpu_type)[0], self.limit_room(team, gpu_type))
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
        team = self.b.team_of.get(job_id, "")
        units = gpus * self.b.weight(job_id, gpu_type)
        for i in self._guards(team, gpu_type):
            self.lhs[i] += units
        row = self.use.setdefault(team, {})
        row[gpu_type] = row.get(gpu_type, 0.0) + units

    def whole(self, job_id: str, gpu_type: str, want: int) -> int:
        """The most of ``want`` GPUs that fit (whole GPUs)."""
        booked = want - self._unbooked(job_id, gpu_type, want)
        room = self.room(job_id, gpu_type) + booked
        if room >= want:
            return max(0, want)
        return max(0, math.floor(room + 1e-9))


def ledger_of(bounds: TeamBounds | None) -> Ledger | None:
    """A ledger when ``bounds`` asks greedy policies to check their grants, else ``None``."""
    return Ledger(bounds) if bounds is not None and bounds.strict else None
