"""Where each team stands: its guarantee, what it uses, borrows and lends.

Pure arithmetic over a list of uses (a job's spec, the GPU type it runs on, its worker
count; a time-fraction allocation gives expected workers), so the same numbers come out
of a snapshot's running jobs, of a policy's allocation and of the simulator's samples.

Units: a ``gpus`` team counts GPUs by type; an ``effective`` team counts
V100-equivalents, one GPU of type T running job j being worth ``rate_j(T) / rate_j(ref)``
(Gavel's normalisation by the job's own throughput; a job with no rate on the reference
type counts one per GPU).

Borrowed is use above the guarantee (all of an unlimited team's use). Borrowing is
served first from capacity no guarantee covers (for ``gpus`` quotas; inference servers
on loan are such capacity, they belong to no team), then from the lenders' idle
guarantee, split in proportion to what each leaves idle (capped by ``lend_limit``): that
share is the lender's ``lent``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lyra_ray.model.teams import EFFECTIVE, Amounts, TeamSet, Unit
from lyra_ray.model.types import GpuType, JobSpec, ThroughputModel


def job_cost(
    spec: JobSpec,
    gpu_type: GpuType,
    workers: float,
    model: ThroughputModel,
    unit: Unit,
    reference: GpuType,
) -> tuple[str, float]:
    """``(key, amount)`` that ``workers`` GPUs of ``gpu_type`` cost a job's team."""
    if unit == "gpus":
        return gpu_type, float(workers)
    size = spec.min_workers
    ref = model.throughput(spec, reference, size)
    here = model.throughput(spec, gpu_type, size)
    if ref <= 0 or here <= 0:
        return EFFECTIVE, float(workers)
    return EFFECTIVE, float(workers) * here / ref


@dataclass(frozen=True, slots=True)
class TeamStanding:
    """One team's line in ``lyra status --json``'s ``teams`` (``guarantee`` is ``None``
    for a team with no limit)."""

    name: str
    unit: Unit
    guarantee: Amounts | None
    used: Amounts
    borrowed: Amounts
    lent: Amounts

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "unit": self.unit,
            "guarantee": self.guarantee,
            "used": self.used,
            "borrowed": self.borrowed,
            "lent": self.lent,
        }


def _add(a: Amounts, key: str, v: float) -> None:
    if v:
        a[key] = a.get(key, 0.0) + v


def account(
    teams: TeamSet,
    capacity: Mapping[GpuType, int],
    uses: Iterable[tuple[JobSpec, GpuType, float]],
    model: ThroughputModel,
) -> dict[str, TeamStanding]:
    """Each team's standing given ``uses`` on a training pool of ``capacity`` GPUs per
    type (lent inference servers included: they are capacity no guarantee covers)."""
    unit = teams.unit
    used: dict[str, Amounts] = {name: {} for name in teams.teams}
    for spec, gpu_type, workers in uses:
        key, amount = job_cost(spec, gpu_type, workers, model, unit, teams.reference)
        _add(used.setdefault(teams.team_of(spec), {}), key, amount)
    guarantee = {n: t.guarantee() for n, t in teams.teams.items()}
    borrowed: dict[str, Amounts] = {}
    idle: dict[str, Amounts] = {}
    for name, use in used.items():
        g = guarantee.get(name, {})
        borrowed[name] = {k: v - g.get(k, 0.0) for k, v in use.items() if v > g.get(k, 0.0)}
        idle[name] = {k: g[k] - use.get(k, 0.0) for k in g if g[k] > use.get(k, 0.0)}
        limit = teams.teams[name].lend_limit if name in teams.teams else None
        total = sum(idle[name].values())
        if limit is not None and total > limit:
            idle[name] = {k: v * limit / total for k, v in idle[name].items()}
    lent: dict[str, Amounts] = {name: {} for name in used}
    keys = {k for b in borrowed.values() for k in b}
    for k in keys:
        covered = sum(g.get(k, 0.0) for g in guarantee.values())
        unowned = max(0.0, float(capacity.get(k, 0)) - covered) if unit == "gpus" else 0.0
        from_lenders = max(0.0, sum(b.get(k, 0.0) for b in borrowed.values()) - unowned)
        pool = sum(i.get(k, 0.0) for i in idle.values())
        if from_lenders <= 0 or pool <= 0:
            continue
        for name, i in idle.items():
            if i.get(k, 0.0) > 0:
                _add(lent[name], k, min(i[k], from_lenders * i[k] / pool))
    return {
        name: TeamStanding(
            name=name,
            unit=unit,
            guarantee=guarantee[name] if teams.teams[name].limited else None,
            used=used[name],
            borrowed=borrowed[name],
            lent=lent[name],
        )
        for name in teams.teams
    }


def total(a: Mapping[str, float]) -> float:
    return float(sum(a.values()))
