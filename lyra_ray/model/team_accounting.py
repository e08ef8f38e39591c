"""Where each team stands: its guarantee, what it uses, borrows and lends.

Pure arithmetic over a list of uses (a job's spec, the GPU type it runs on, its worker
count; a time-fraction allocation gives expected workers), so the same numbers come out
of a snapshot's running jobs, of a policy's allocation and of the simulator's samples.

Units: a ``gpus`` team counts GPUs by type; an ``effective`` team counts GPUs of the
reference type ``ref`` (:func:`lyra_ray.model.teams.reference_of`), one GPU of type T
running job j being worth ``rate_j(T) / rate_j(ref)`` (Gavel's normalisation by the
job's own throughput). Every rate comes from the scheduler's throughput model: a
measurement (``lyra profile``, or the live runtime's), the catalogue, or the job's spec.

The capacity rule (:func:`reference_factors`, :func:`effective_capacity`). A type's
*factor* is the GPU-weighted mean, over the queued and running jobs that have a rate both
there and on the reference type, of ``rate_j(T) / rate_j(ref)``; the reference's factor is
1, and a type no such job covers counts 1 too. The cluster's capacity in reference units
is the sum over types of GPUs times factor: what effective guarantees are checked
against. A job with no rate on the reference type (or none on T) has no ratio of its own:
it is counted at T's factor, and :func:`rate_note` says so.

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


def ratio(
    spec: JobSpec, gpu_type: GpuType, model: ThroughputModel, reference: GpuType
) -> float | None:
    """``rate(gpu_type) / rate(reference)`` of the job at its size, ``None`` without both."""
    if gpu_type == reference:
        return 1.0
    size = spec.min_workers
    ref = model.throughput(spec, reference, size)
    here = model.throughput(spec, gpu_type, size)
    if not (ref > 0 and here > 0):
        return None
    return here / ref


def reference_factors(
    specs: Iterable[JobSpec],
    capacity: Mapping[GpuType, int],
    model: ThroughputModel,
    reference: GpuType,
) -> dict[GpuType, float]:
    """Each type's factor in reference units (the module's capacity rule)."""
    num: dict[GpuType, float] = {}
    den: dict[GpuType, float] = {}
    types = [g for g in capacity if g != reference]
    for spec in specs:
        w = float(max(1, spec.min_workers))
        for g in types:
            r = ratio(spec, g, model, reference)
            if r is not None:
                num[g] = num.get(g, 0.0) + w * r
                den[g] = den.get(g, 0.0) + w
    out = {g: (num[g] / den[g] if den.get(g) else 1.0) for g in types}
    out[reference] = 1.0
    return out


def effective_capacity(capacity: Mapping[GpuType, int], factors: Mapping[GpuType, float]) -> float:
    """The training pool's capacity in reference units (the module's capacity rule)."""
    return float(sum(n * factors.get(g, 1.0) for g, n in capacity.items()))


def job_cost(
    spec: JobSpec,
    gpu_type: GpuType,
    workers: float,
    model: ThroughputModel,
    unit: Unit,
    reference: GpuType,
    factors: Mapping[GpuType, float] | None = None,
) -> tuple[str, float]:
    """``(key, amount)`` that ``workers`` GPUs of ``gpu_type`` cost a job's team: GPUs of
    that type, or reference units (the job's own ratio, else the type's factor, else 1)."""
    if unit == "gpus":
        return gpu_type, float(workers)
    r = ratio(spec, gpu_type, model, reference)
    if r is None:
        r = (factors or {}).get(gpu_type, 1.0)
    return EFFECTIVE, float(workers) * r


def rate_note(
    spec: JobSpec,
    gpu_type: GpuType,
    model: ThroughputModel,
    reference: GpuType,
    factors: Mapping[GpuType, float] | None = None,
) -> str | None:
    """The sentence a job's standing carries when its effective cost on ``gpu_type`` is
    not its own ratio; ``None`` when it is."""
    if ratio(spec, gpu_type, model, reference) is not None:
        return None
    f = (factors or {}).get(gpu_type, 1.0)
    has_ref = model.throughput(spec, reference, spec.min_workers) > 0
    missing = gpu_type if has_ref else reference
    return (
        f"job {spec.name!r} has no rate on {missing} (measured, catalogue or spec): each of "
        f"its {gpu_type} GPUs counts {f:.3g} {reference}, the cluster's {gpu_type} factor"
    )


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
    reference: GpuType | None = None
    """The reference type effective amounts are counted in (``None`` for ``gpus``)."""
    notes: tuple[str, ...] = ()
    """Jobs of the team whose effective cost is not their own ratio (:func:`rate_note`)."""

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "unit": self.unit,
            "guarantee": self.guarantee,
            "used": self.used,
            "borrowed": self.borrowed,
            "lent": self.lent,
            "reference": self.reference,
            "notes": list(self.notes),
        }


def _add(a: Amounts, key: str, v: float) -> None:
    if v:
        a[key] = a.get(key, 0.0) + v


def account(
    teams: TeamSet,
    capacity: Mapping[GpuType, int],
    uses: Iterable[tuple[JobSpec, GpuType, float]],
    model: ThroughputModel,
    factors: Mapping[GpuType, float] | None = None,
) -> dict[str, TeamStanding]:
    """Each team's standing given ``uses`` on a training pool of ``capacity`` GPUs per
    type (lent inference servers included: they are capacity no guarantee covers).
    ``factors``: the types' factors (:func:`reference_factors`, from the queued and
    running jobs); by default from the jobs in ``uses``."""
    unit = teams.unit
    reference = teams.reference_for(capacity)
    uses = list(uses)
    if unit == "effective" and factors is None:
        factors = reference_factors(
            list({id(s): s for s, _, _ in uses}.values()), capacity, model, reference
        )
    used: dict[str, Amounts] = {name: {} for name in teams.teams}
    notes: dict[str, list[str]] = {}
    for spec, gpu_type, workers in uses:
        key, amount = job_cost(spec, gpu_type, workers, model, unit, reference, factors)
        team = teams.team_of(spec)
        _add(used.setdefault(team, {}), key, amount)
        if unit == "effective":
            note = rate_note(spec, gpu_type, model, reference, factors)
            if note is not None:
                notes.setdefault(team, []).append(note)
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
            reference=reference if unit == "effective" else None,
            notes=tuple(notes.get(name, ())),
        )
        for name in teams.teams
    }


def total(a: Mapping[str, float]) -> float:
    return float(sum(a.values()))
