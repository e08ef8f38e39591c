"""Teams and their quotas: who owns which share of the cluster, and who may borrow.

A :class:`Team` is guaranteed a quota, either GPUs by type (``v100=4,k80=8``, the
node-pool grammar of :mod:`lyra_ray.model.pools`) or an *effective* quota in
V100-equivalents of effective throughput (Gavel's normalisation: a job's GPU counts as
its throughput there over its throughput on the reference type). Beyond its guarantee a
team may borrow up to ``borrow_limit``; it lends at most ``lend_limit`` of its idle
guarantee; ``preemptible=False`` keeps its running work from being taken back.

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
REFERENCE_TYPE = "v100"
"""Gavel normalises throughputs to the V100; an effective quota counts V100-equivalents."""
Unit = Literal["gpus", "effective"]
Amounts = dict[str, float]
"""GPUs per type (``gpus``) or ``{"effective": V100-equivalents}``."""


@dataclass(frozen=True, slots=True)
class Team:
    """A team's quota and the rules for lending and borrowing it.

    ``quota`` is ``None`` for a team with no limit (``default``): it is guaranteed
    nothing and may use whatever no one else's guarantee needs. ``borrow_limit`` and
    ``lend_limit`` are totals in the team's unit (GPUs over all types, or
    V100-equivalents); ``None`` is no limit.
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
    be added, so one cluster cannot lend between them).
    """

    teams: Mapping[str, Team]
    users: Mapping[str, str] = field(default_factory=dict)
    jobs: Mapping[str, str] = field(default_factory=dict)
    reference: GpuType = REFERENCE_TYPE

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


def _where(source: str, path: str) -> str:
    return f"{source}: field '{path}'"


def _amount(source: str, path: str, v: object, allow_none: bool = True) -> float | None:
    """A finite, non-negative quantity of GPUs or V100-equivalents (or ``None``)."""
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
    if lend is not None and unit == "effective":
        raise InputError(
            f"{_where(source, f'{where}.lend_limit')}: applies to GPU quotas only (a cluster's "
            "capacity in V100-equivalents depends on which jobs run); use borrow_limit"
        )
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


def parse_teams(raw: object, source: str, cluster: Mapping[str, int] | None = None) -> TeamSet:
    """A :class:`TeamSet` from plain data (a parsed YAML file or the ``lyra:`` config).

    ``{teams: {NAME: {quota: "v100=4" | quota_effective: N, weight, borrow_limit,
    lend_limit, preemptible}}, users: {USER: TEAM}, jobs: {JOB NAME: TEAM}, reference:
    TYPE}``. ``cluster`` (GPUs per type of the training pool), when known, refuses a
    quota on a type the cluster lacks and GPU guarantees summing above the cluster's.
    A ``default`` team with no limit is added unless the input names one.
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: expected a mapping with 'teams', got {raw!r}"[:300])
    unknown = sorted(str(k) for k in raw if k not in {"teams", "users", "jobs", "reference"})
    if unknown:
        raise InputError(
            f"{_where(source, unknown[0])}: unknown; known: jobs, reference, teams, users"
        )
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
    if cluster is not None and units == {"gpus"}:
        for g, have in sorted(cluster.items()):
            total = sum((t.quota or {}).get(g, 0.0) for t in teams.values())
            if total > have:
                raise InputError(
                    f"{_where(source, 'teams')}: quotas of {g} sum to {total:g} GPUs; the "
                    f"cluster has {have}"
                )
    reference = raw.get("reference", REFERENCE_TYPE)
    if not isinstance(reference, str) or not reference:
        raise InputError(f"{_where(source, 'reference')}: must be a GPU type, got {reference!r}")
    return TeamSet(
        teams=teams,
        users=_members(source, "users", raw.get("users"), teams),
        jobs=_members(source, "jobs", raw.get("jobs"), teams),
        reference=reference.lower(),
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
