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

from collections.abc import Mapping, Sequence

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
