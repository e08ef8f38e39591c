"""What an allocation uses per team, and the last resort that cuts it to the teams' bounds.

Most policies take the bounds themselves (Gavel's LPs as rows, greedy policies through a
ledger: :mod:`lyra_ray.model.team_bounds`). A policy that does not (a closed-form split,
a ``module:Class`` policy of a user's) still gets an answer within the bounds from
:func:`fit`: time fractions are scaled down where a row is broken, worker grants are
replayed in the teams' order (running jobs oldest start first, then queued ones by
arrival; every minimum before any flexible worker), keeping what fits. So even there a
borrower's elastic jobs shrink before a borrowed minimum is dropped, and the newest
borrowed jobs are the ones dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobView, split_pair
from lyra_ray.model.team_bounds import Ledger, TeamBounds

Use = tuple[JobId, GpuType, float]


def sizes(snap: ClusterSnapshot, active: Iterable[JobView] | None = None) -> dict[JobId, int]:
    """Each active job's scale factor: the GPUs one unit of time fraction holds."""
    jobs = snap.active_jobs if active is None else active
    return {j.id: max(1, j.spec.min_workers) for j in jobs}


def uses(alloc: Allocation, sf: Mapping[JobId, int]) -> Iterator[Use]:
    """``(job, GPU type, GPUs)`` the allocation holds on average: a time fraction X of a
    job holds ``X sf`` GPUs; a pair holds its GPUs (the larger member's size) once, half
    charged to each member; a worker grant holds its workers, on each of its types."""
    for key, row in alloc.fractions.items():
        members = split_pair(key)
        if len(members) == 1:
            n = sf.get(key, 1)
            for g, x in row.items():
                if x > 0:
                    yield key, g, x * n
            continue
        gpus = max(sf.get(m, 1) for m in members)
        for g, x in row.items():
            if x > 0:
                for m in members:
                    yield m, g, x * gpus / len(members)
    for jid, (g, n) in alloc.workers.items():
        parts = alloc.extra.get(jid, ())
        yield jid, g, float(n - sum(k for _, k in parts))
        for g2, k in parts:
            yield jid, g2, float(k)


def respects(alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds) -> bool:
    return not bounds.violated(bounds.tally(uses(alloc, sizes(snap))))


def fit(alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds) -> Allocation:
    """``alloc`` cut to the bounds (module docstring); unchanged where it respects them."""
    fractions = _fit_fractions(alloc, snap, bounds) if alloc.fractions else {}
    if alloc.workers:
        workers, extra = _fit_workers(alloc, snap, bounds)
    else:
        workers, extra = {}, dict(alloc.extra)
    return dataclasses.replace(alloc, fractions=fractions, workers=workers, extra=extra)


def _fit_fractions(
    alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds
) -> dict[str, dict[GpuType, float]]:
    """Scale down, row by broken row, every counted entry's fractions on the row's types
    (each pass only lowers use, so no row it mended breaks again; a limit row of other
    types may appear, hence the few passes)."""
    sf = sizes(snap)
    X = {k: dict(v) for k, v in alloc.fractions.items()}
    only = Allocation(fractions=X)
    for _ in range(64):
        tally = bounds.tally(uses(only, sf))
        bad = bounds.violated(tally, floors=False)
        if not bad:
            break
        for row in bad:
            tally = bounds.tally(uses(only, sf))
            lhs = bounds.lhs(row, tally)
            if lhs <= row.rhs:
                continue
            f = max(0.0, row.rhs) / lhs * (1 - 1e-9)
            for key, xs in X.items():
                if any(row.counts(bounds.team(m, "")) for m in split_pair(key)):
                    for g in xs:
                        if row.counts_type(g):
                            xs[g] *= f
    return X


def grant_order(snap: ClusterSnapshot) -> list[JobView]:
    """Running jobs, oldest start first, then queued ones by arrival."""
    return sorted(
        snap.active_jobs,
        key=lambda j: (
            j.current is None,
            (j.first_start_s if j.first_start_s is not None else j.arrival_s)
            if j.current is not None
            else j.arrival_s,
            j.arrival_s,
            j.id,
        ),
    )


def _fit_workers(
    alloc: Allocation, snap: ClusterSnapshot, bounds: TeamBounds
) -> tuple[dict[JobId, tuple[GpuType, int]], dict[JobId, tuple[tuple[GpuType, int], ...]]]:
    ledger = Ledger(bounds, book=False)
    order = [j for j in grant_order(snap) if j.id in alloc.workers]
    base: dict[JobId, int] = {}
    for j in order:  # every minimum first
        g, n = alloc.workers[j.id]
        own = n - sum(k for _, k in alloc.extra.get(j.id, ()))
        need = min(own, j.spec.min_workers)
        if ledger.fits(j.id, g, need):
            ledger.take(j.id, g, need)
            base[j.id] = need
    workers: dict[JobId, tuple[GpuType, int]] = {}
    extra: dict[JobId, tuple[tuple[GpuType, int], ...]] = {}
    for j in order:  # then flexible workers, on the base's type, then on others
        if j.id not in base:
            continue
        g, n = alloc.workers[j.id]
        parts = alloc.extra.get(j.id, ())
        own = n - sum(k for _, k in parts)
        more = ledger.whole(j.id, g, own - base[j.id])
        ledger.take(j.id, g, more)
        kept = []
        for g2, k in parts:
            k2 = ledger.whole(j.id, g2, k)
            if k2 > 0:
                ledger.take(j.id, g2, k2)
                kept.append((g2, k2))
        workers[j.id] = (g, base[j.id] + more + sum(k for _, k in kept))
        if kept:
            extra[j.id] = tuple(kept)
    return workers, extra
