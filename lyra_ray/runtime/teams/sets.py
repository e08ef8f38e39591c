"""The team set one decision uses, and where each team stands (``lyra status``).

WHY jobs are mapped to teams by their spec object: a live job's team is the one it was
submitted under (kept with the job, restart-safe), which may differ from its owner's
team now; the pure ``TeamSet`` resolves a spec, and the snapshot's views share the
core's spec objects, so one dictionary built per decision is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lyra_ray.model import ClusterSnapshot, JobSpec
from lyra_ray.model.team_accounting import (
    TeamStanding,
    account,
    effective_capacity,
    reference_factors,
)
from lyra_ray.model.teams import TeamSet, oversubscription
from lyra_ray.model.types import GpuType
from lyra_ray.policies.teams.bounds import own_training


@dataclass(frozen=True)
class LiveTeamSet(TeamSet):
    """A :class:`TeamSet` whose jobs' teams are known per job (by spec object)."""

    by_spec: Mapping[int, str] = field(default_factory=dict)

    def team_of(self, spec: JobSpec) -> str:
        team = self.by_spec.get(id(spec))
        if team is not None and team in self.teams:
            return team
        return TeamSet.team_of(self, spec)


def uses(snap: ClusterSnapshot) -> Iterable[tuple[JobSpec, GpuType, float]]:
    """(spec, GPU type, workers) of every running job's every part (mixed types too)."""
    for j in snap.jobs:
        a = j.current
        if a is None:
            continue
        extra = sum(n for _, n in a.extra)
        if a.workers - extra > 0:
            yield j.spec, a.gpu_type, float(a.workers - extra)
        for g, n in a.extra:
            yield j.spec, g, float(n)


def factors(snap: ClusterSnapshot, teams: TeamSet) -> dict[GpuType, float]:
    """The types' factors in reference units from the queued and running jobs (the
    capacity rule, :mod:`lyra_ray.model.team_accounting`)."""
    ref = teams.reference_for(own_training(snap))
    specs = [j.spec for j in snap.active_jobs]
    return reference_factors(specs, snap.gpus_by_type(), snap.throughput_model, ref)


def standings(snap: ClusterSnapshot, teams: TeamSet) -> list[TeamStanding]:
    """Each team's guarantee, use, borrowed and lent capacity now (by name)."""
    f = factors(snap, teams) if teams.unit == "effective" else None
    got = account(teams, snap.gpus_by_type(), uses(snap), snap.throughput_model, f)
    return [got[n] for n in sorted(got)]


def oversubscribed(snap: ClusterSnapshot, teams: TeamSet) -> str | None:
    """Why the teams' guarantees do not fit this cluster now (its training pool, and for
    effective quotas its capacity in reference units for the queued and running jobs),
    or ``None``."""
    pool = snap.gpus_by_type()
    eff = effective_capacity(pool, factors(snap, teams)) if teams.unit == "effective" else None
    return oversubscription(teams.teams, pool, eff)
