"""Teams and their quotas: who owns which share of the cluster, and who may borrow.

A :class:`Team` is guaranteed a quota, either GPUs by type (``v100=4,k80=8``, the
node-pool grammar of :mod:`lyra_ray.model.pools`) or an *effective* quota in GPUs of the
*reference type* (Gavel's normalisation: a job's GPU counts as its throughput there over
its throughput on the reference type). The reference type is a setting of the team set;
by default it is the cluster's most common training type (:func:`reference_of`), so "8
effective" means eight GPUs' worth of that type's throughput on any cluster, V100s or
none. Beyond its guarantee a team may borrow up to ``borrow_limit``; it lends at most
``lend_limit`` of its idle guarantee; ``preemptible=False`` keeps its running work from
being taken back.

WHY a ``default`` team with no limit: every user without a team belongs to it, so a
cluster that names no team schedules exactly as before (the enforcing policy is not even
built), and one that names some teams still runs everybody else's work, on what the
teams leave idle. Checks happen once, here, and each error names the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from lyra_ray.model.admission import MAX_WEIGHT, MIN_WEIGHT
from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import MAX_GPUS_PER_TYPE, parse_pool
from lyra_ray.model.types import GpuType, JobSpec

DEFAULT_TEAM = "default"
EFFECTIVE = "effective"
"""The one key of an effective quota's amounts (GPU types key a ``gpus`` quota's)."""
AUTO = "auto"
"""The reference setting that means "the cluster's most common training type"."""
Unit = Literal["gpus", "effective"]
Enforce = Literal["inside", "pin"]
ENFORCE: tuple[Enforce, ...] = ("inside", "pin")
"""How the policy wrapper enforces quotas: as bounds inside the inner policy's own
allocation (``inside``, the default), or by admitting each job onto one GPU type first
and pinning it there (``pin``, the path before issue #42, kept for comparison)."""
Amounts = dict[str, float]
"""GPUs per type (``gpus``) or ``{"effective": GPUs of the reference type}``."""


def reference_of(reference: GpuType | None, capacity: Mapping[GpuType, int]) -> GpuType:
    """The reference type in force: the setting, else the type with the most GPUs in the
    training pool (``capacity``), the alphabetically first among equals. WHY the most
    common type: an effective quota then reads as "GPUs of what this cluster mostly
    has", and it needs no setting on a cluster without V100s. An empty cluster has no
    type to choose; ``v100`` (Gavel's) is used then."""
    if reference:
        return reference
    best = sorted((g for g, n in capacity.items() if n > 0), key=lambda g: (-capacity[g], g))
    return best[0] if best else "v100"


def oversubscription(
    teams: Mapping[str, Team],
    capacity: Mapping[GpuType, int],
    effective_capacity: float | None = None,
) -> str | None:
    """Why the guarantees cannot all be met at once on this cluster, or ``None``.

    ``gpus`` quotas: the guarantees of a type summed against the training pool's GPUs
    of that type. ``effective`` quotas: summed against ``effective_capacity``, the
    cluster's capacity in reference units (:func:`lyra_ray.model.team_accounting.
    effective_capacity`), when the caller has it."""
    units = {t.unit for t in teams.values() if t.limited}
    if units == {"gpus"}:
        for g in sorted({k for t in teams.values() for k in (t.quota or {})}):
            total = sum((t.quota or {}).get(g, 0.0) for t in teams.values())
            have = capacity.get(g, 0)
            if total > have + 1e-9:
                return f"quotas of {g} sum to {total:g} GPUs; the cluster has {have}"
    if units == {"effective"} and effective_capacity is not None:
        total = sum((t.quota or {}).get(EFFECTIVE, 0.0) for t in teams.values())
        if total > effective_capacity + 1e-9:
            return (
                f"effective quotas sum to {total:g}; the cluster holds "
                f"{effective_capacity:.4g} in reference units"
            )
    return None


@dataclass(frozen=True, slots=True)
class Team:
    """A team's quota and the rules for lending and borrowing it.

    ``quota`` is ``None`` for a team with no limit (``default``): it is guaranteed
    nothing and may use whatever no one else's guarantee needs. ``borrow_limit`` and
    ``lend_limit`` are totals in the team's unit (GPUs over all types, or
    reference units); ``None`` is no limit.
    """

    name: str
    quota: Mapping[str, float] | None = None
    unit: Unit = "gpus"
    weight: float = 1.0
    borrow_limit: float | None = None
    lend_limit: float | None = None
    preemptible: bool = True

    @property
    def limited(self) -> bool:
        return self.quota is not None

    def guarantee(self) -> Amounts:
        return dict(self.quota or {})


@dataclass(frozen=True)
class TeamSet:
    """Every team, and who belongs to which: users, and jobs named one by one.

    A job runs under the team its name is mapped to, else its owner's, else
    ``default``. All limited teams share one unit (a GPU count and a throughput cannot
    be added, so one cluster cannot lend between them). ``reference``: the reference
    type of effective quotas, ``None`` for the cluster's most common training type
    (:func:`reference_of`); ``enforce``: see :data:`ENFORCE`.
    """

    teams: Mapping[str, Team]
    users: Mapping[str, str] = field(default_factory=dict)
    jobs: Mapping[str, str] = field(default_factory=dict)
    reference: GpuType | None = None
    enforce: Enforce = "inside"

    def team_of(self, spec: JobSpec) -> str:
        return self.jobs.get(spec.name) or self.users.get(spec.user) or DEFAULT_TEAM

    @property
    def unit(self) -> Unit:
        for t in self.teams.values():
            if t.limited:
                return t.unit
        return "gpus"

    @property
    def any_limited(self) -> bool:
        return any(t.limited for t in self.teams.values())

    def weights(self) -> dict[str, float]:
        return {name: t.weight for name, t in self.teams.items()}

    def reference_for(self, capacity: Mapping[GpuType, int]) -> GpuType:
        """The reference type in force on a training pool of ``capacity``."""
        return reference_of(self.reference, capacity)


def _where(source: str, path: str) -> str:
    return f"{source}: field '{path}'"


def _amount(source: str, path: str, v: object, allow_none: bool = True) -> float | None:
    """A finite, non-negative quantity of GPUs or reference units (or ``None``)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"{_where(source, path)}: must be a number, got {v!r}"[:300])
    if not math.isfinite(v) or not 0 <= v <= MAX_GPUS_PER_TYPE:
        raise InputError(
            f"{_where(source, path)}: must be a finite number in [0, {MAX_GPUS_PER_TYPE}], "
            f"got {v!r}"[:300]
        )
    return float(v)


def _team(source: str, name: str, raw: object, cluster: Mapping[str, int] | None) -> Team:
    where = f"teams.{name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{_where(source, where)}: must be a mapping, got {raw!r}"[:300])
    known = {"quota", "quota_effective", "weight", "borrow_limit", "lend_limit", "preemptible"}
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise InputError(
            f"{_where(source, f'{where}.{unknown[0]}')}: unknown; known: {', '.join(sorted(known))}"
        )
    if "quota" in raw and "quota_effective" in raw:
        raise InputError(f"{_where(source, where)}: give 'quota' or 'quota_effective', not both")
    quota: dict[str, float] | None = None
    unit: Unit = "gpus"
    if raw.get("quota") is not None:
        pool = parse_pool(raw["quota"], _where(source, f"{where}.quota"))
        quota = {g: float(n) for g, n in pool.gpus().items()}
        if cluster is not None:
            lacking = sorted(g for g in quota if g not in cluster)
            if lacking:
                raise InputError(
                    f"{_where(source, f'{where}.quota')}: GPU type {lacking[0]!r} is not in the "
                    f"cluster (it has {', '.join(sorted(cluster)) or 'none'})"
                )
    elif raw.get("quota_effective") is not None:
        eff = _amount(source, f"{where}.quota_effective", raw["quota_effective"], False)
        quota, unit = {EFFECTIVE: float(eff or 0.0)}, "effective"
    weight = raw.get("weight", 1.0)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not (math.isfinite(weight) and MIN_WEIGHT <= weight <= MAX_WEIGHT)
    ):
        raise InputError(
            f"{_where(source, f'{where}.weight')}: must be a finite number in "
            f"[{MIN_WEIGHT:g}, {MAX_WEIGHT:g}], got {weight!r}"[:300]
        )
    preemptible = raw.get("preemptible", True)
    if not isinstance(preemptible, bool):
        raise InputError(
            f"{_where(source, f'{where}.preemptible')}: must be true or false, got {preemptible!r}"
        )
    lend = _amount(source, f"{where}.lend_limit", raw.get("lend_limit"))
    return Team(
        name=name,
        quota=quota,
        unit=unit,
        weight=float(weight),
        borrow_limit=_amount(source, f"{where}.borrow_limit", raw.get("borrow_limit")),
        lend_limit=lend,
        preemptible=preemptible,
    )


def _members(source: str, key: str, raw: object, teams: Mapping[str, Team]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{_where(source, key)}: must be a mapping of names to teams"[:300])
    out: dict[str, str] = {}
    for who, team in raw.items():
        if not isinstance(who, str) or not who:
            raise InputError(f"{_where(source, key)}: names must be strings, got {who!r}"[:300])
        if team not in teams:
            raise InputError(
                f"{_where(source, f'{key}.{who}')}: unknown team {team!r}; teams: "
                f"{', '.join(sorted(teams))}"[:300]
            )
        out[who] = str(team)
    return out


def parse_teams(
    raw: object,
    source: str,
    cluster: Mapping[str, int] | None = None,
    effective_capacity: float | None = None,
) -> TeamSet:
    """A :class:`TeamSet` from plain data (a parsed YAML file or the ``lyra:`` config).

    ``{teams: {NAME: {quota: "v100=4" | quota_effective: N, weight, borrow_limit,
    lend_limit, preemptible}}, users: {USER: TEAM}, jobs: {JOB NAME: TEAM}, reference:
    TYPE | auto, enforce: inside | pin}``. ``cluster`` (GPUs per type of the training
    pool), when known, refuses a quota or a reference on a type the cluster lacks and
    guarantees the cluster cannot hold (:func:`oversubscription`; effective ones when
    ``effective_capacity``, the cluster's capacity in reference units, is given too).
    A ``default`` team with no limit is added unless the input names one.
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: expected a mapping with 'teams', got {raw!r}"[:300])
    known = ("enforce", "jobs", "reference", "teams", "users")
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise InputError(f"{_where(source, unknown[0])}: unknown; known: {', '.join(known)}")
    raw_teams = raw.get("teams")
    if not isinstance(raw_teams, Mapping) or not raw_teams:
        raise InputError(f"{_where(source, 'teams')}: must be a non-empty mapping of teams")
    teams: dict[str, Team] = {}
    for name, body in raw_teams.items():
        if not isinstance(name, str) or not name.strip() or len(name) > 64:
            raise InputError(f"{_where(source, 'teams')}: bad team name {name!r}"[:300])
        teams[name] = _team(source, name, body, cluster)
    teams.setdefault(DEFAULT_TEAM, Team(DEFAULT_TEAM))
    units = {t.unit for t in teams.values() if t.limited}
    if len(units) > 1:
        raise InputError(
            f"{_where(source, 'teams')}: every quota must use one unit (all 'quota' or all "
            "'quota_effective')"
        )
    if cluster is not None:
        why = oversubscription(teams, cluster, effective_capacity)
        if why is not None:
            raise InputError(f"{_where(source, 'teams')}: {why}")
    return TeamSet(
        teams=teams,
        users=_members(source, "users", raw.get("users"), teams),
        jobs=_members(source, "jobs", raw.get("jobs"), teams),
        reference=parse_reference(raw.get("reference"), source, cluster),
        enforce=_enforce(raw.get("enforce", "inside"), source),
    )


def parse_reference(raw: object, source: str, cluster: Mapping[str, int] | None) -> str | None:
    """The ``reference`` setting: a GPU type (one the cluster has, when known), or
    ``auto`` / absent for the cluster's most common training type (``None``)."""
    if raw is None or raw == AUTO:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(
            f"{_where(source, 'reference')}: must be a GPU type or 'auto', got {raw!r}"[:300]
        )
    ref = raw.strip().lower()
    if cluster is not None and ref not in cluster:
        raise InputError(
            f"{_where(source, 'reference')}: GPU type {ref!r} is not in the cluster (it has "
            f"{', '.join(sorted(cluster)) or 'none'})"
        )
    return ref


def _enforce(raw: object, source: str) -> Enforce:
    for e in ENFORCE:
        if raw == e:
            return e
    raise InputError(
        f"{_where(source, 'enforce')}: must be one of {', '.join(ENFORCE)}, got {raw!r}"[:300]
    )


def load_teams(path: str, cluster: Mapping[str, int] | None = None) -> TeamSet:
    """Read and check a teams YAML file (``lyra simulate --teams``)."""
    import yaml

    from lyra_ray.model.errors import read_text_input

    text = read_text_input(path, "teams file")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not YAML: {str(e).splitlines()[0]}"[:300]) from None
    return parse_teams(raw, path, cluster)
