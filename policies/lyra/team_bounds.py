"""Teams' quotas inside Lyra's phases: grants checked against the teams' bounds.

The teams wrapper (:mod:`lyra_ray.policies.teams`) hands Lyra a snapshot whose
``team_bounds`` say how much of each GPU type each team may hold (its guarantee kept for
it, its borrowing within limits). Lyra keeps every choice of its own: the order of the
base demand (running jobs first, then shortest first), the flexible knapsack, the
cross-type workers. Each grant is only checked with the bounds' ledger where the phases
make it: a base that does not fit its team's bounds on a type is not placed there;
:func:`flexible_within` and :func:`extras_within` trim what phases 2 and 3 chose to what
the team may still take. So phase 1's bases come before any flexible worker and a
borrower's elastic jobs shrink before a borrowed base is dropped; and where no bound
refuses a grant the answer is Lyra's own, bit for bit (the knapsack is not told the
bounds: it is a heuristic, and a bound that does not bind could still steer it).

WHY a module of its own: the phases stay as they are; this is the one place that knows
about teams.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lyra_ray.model import GpuType, JobId
from lyra_ray.model.team_bounds import Ledger


def flexible_within(
    ledger: Ledger,
    ids: Sequence[JobId],
    t: GpuType,
    bases: Sequence[int],
    sizes: Sequence[int],
) -> tuple[int, ...]:
    """Phase 2's sizes on type ``t``, each job's flexible workers trimmed (in the phase's
    order) to what its team may take, and taken."""
    out = []
    for j, base, w in zip(ids, bases, sizes, strict=True):
        k = ledger.whole(j, t, max(0, w - base))
        ledger.take(j, t, k)
        out.append(base + k)
    return tuple(out)


def extras_within(
    ledger: Ledger, extra: Mapping[JobId, tuple[tuple[GpuType, int], ...]]
) -> dict[JobId, tuple[tuple[GpuType, int], ...]]:
    """Phase 3's workers on other types, trimmed to what each job's team may take."""
    out: dict[JobId, tuple[tuple[GpuType, int], ...]] = {}
    for j, parts in extra.items():
        kept = []
        for g, n in parts:
            k = ledger.whole(j, g, n)
            if k > 0:
                ledger.take(j, g, k)
                kept.append((g, k))
        if kept:
            out[j] = tuple(kept)
    return out


def move_within(ledger: Ledger) -> Callable[[JobId, GpuType, GpuType, int], bool]:
    """A move's check for :func:`lyra_ray.policies.lyra.moves.move_to_faster`: a job moves
    from one type to another only if its team may take its base on the new type; the
    move then gives back what phase 1 took on the old one and takes the new."""

    def book(job: JobId, src: GpuType, dst: GpuType, gpus: int) -> bool:
        if not ledger.fits(job, dst, gpus):
            return False
        ledger.release(job, src, gpus)
        ledger.take(job, dst, gpus)
        return True

    return book
