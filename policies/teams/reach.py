"""Which teams the bounds leave nothing: their jobs sit out of a max-min objective.

A max-min policy (Gavel's LAS, finish-time fairness) maximises the worst job's share. If
the rows give a team no GPU at all (every guarantee claimed, the rest of the cluster
reserved), its jobs hold the minimum at zero and the LP has nothing left to optimise:
any feasible allocation is then optimal, the others' included. So once rows are handed
to a policy, the jobs of a team the rows *close* are taken out of the optimisation (as
jobs that cannot run anywhere are: ``Problem.runnable``), and wait for their quota.

A team is closed when even a relaxation gives it nothing: one variable per team and GPU
type it can run on (GPUs), the cluster's capacity, the share rule, every floor and borrow
limit over those aggregates (effective units at the most favourable of the team's own
per-GPU weights, so the relaxation never shuts a team the rows leave room for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import ClusterSnapshot, GpuType
from lyra_ray.model.team_bounds import TeamBounds
from lyra_ray.policies.gavel.lazy_import import lazy_module
from lyra_ray.policies.gavel.lp import SolverError, solve_min

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

EPS = 1e-7
"""GPUs below which a team's best share counts as none."""


def closed_teams(
    snap: ClusterSnapshot, bounds: TeamBounds, capacity: Mapping[GpuType, int]
) -> frozenset[str]:
    """The teams with active jobs that the bounds leave no GPU (module docstring)."""
    types = sorted(g for g, n in capacity.items() if n > 0)
    runs: dict[str, set[GpuType]] = {}
    lo: dict[tuple[str, GpuType], float] = {}
    hi: dict[tuple[str, GpuType], float] = {}
    for j in snap.active_jobs:
        team = bounds.team(j.id, "")
        row = j.throughput
        for g in types:
            rate = row.get(g)
            if rate is None:
                rate = snap.throughput(j, g)
            if rate > 0 and j.spec.min_workers <= capacity[g]:
                runs.setdefault(team, set()).add(g)
                w = bounds.weight(j.id, g)
                lo[team, g] = min(lo.get((team, g), w), w)
                hi[team, g] = max(hi.get((team, g), w), w)
    cols = [(t, g) for t in sorted(runs) for g in sorted(runs[t])]
    if not cols:
        return frozenset()
    idx = {c: i for i, c in enumerate(cols)}
    lim_teams = [t for t in sorted(bounds.limits) if t in runs and not bounds.effective]
    borrow = {
        (t, g): len(cols) + i
        for i, (t, g) in enumerate((t, g) for t in lim_teams for g in sorted(runs[t]))
    }
    n = len(cols) + len(borrow)
    A: list[NDArray[np.float64]] = []
    b: list[float] = []

    def empty() -> NDArray[np.float64]:
        return np.zeros(n)

    # the share rule: per key, the teams' max(use, reserved) within the capacity, with
    # m_t >= use_t (in units at the team's lowest weight) and m_t >= reserved_t
    keys = [bounds.key(g) for g in types]
    share = {
        (t, k): n + i for i, (t, k) in enumerate((t, k) for k in dict.fromkeys(keys) for t in runs)
    }
    n += len(share)
    lb = np.zeros(n)
    for (t, k), m in share.items():
        lb[m] = bounds.reserved.get(t, {}).get(k, 0.0)
    for g in types:  # the GPUs themselves
        r = empty()
        for t in runs:
            if (t, g) in idx:
                r[idx[t, g]] = 1.0
        A.append(r)
        b.append(float(capacity[g]))
    for (t, k), m in share.items():
        r = empty()
        for g in runs[t]:
            if bounds.key(g) == k:
                r[idx[t, g]] = lo[t, g]
        r[m] = -1.0
        A.append(r)
        b.append(0.0)
    for k in dict.fromkeys(keys):
        r = empty()
        for t in runs:
            r[share[t, k]] = 1.0
        others = sum(v.get(k, 0.0) for t, v in bounds.reserved.items() if t not in runs)
        A.append(r)
        b.append(bounds.capacity.get(k, 0.0) - others)
    for q in bounds.floors:
        r = empty()
        for (t, g), i in idx.items():
            if q.counts(t) and q.counts_type(g):
                r[i] = -hi[t, g]
        A.append(r)
        b.append(-q.rhs)
    for t, lim in bounds.limits.items():
        if t not in runs:
            continue
        if bounds.effective:
            r = empty()
            for g in runs[t]:
                r[idx[t, g]] = lo[t, g]
            A.append(r)
            b.append(lim.guarantee.get("*", 0.0) + lim.borrow_limit)
            continue
        total = empty()
        for g in runs[t]:  # g - b_g <= guarantee_g; sum_g b_g <= limit
            r = empty()
            r[idx[t, g]] = 1.0
            r[borrow[t, g]] = -1.0
            A.append(r)
            b.append(lim.guarantee.get(g, 0.0))
            total[borrow[t, g]] = 1.0
        A.append(total)
        b.append(lim.borrow_limit)
    A_ub, b_ub = sp.csr_matrix(np.array(A)), np.array(b)
    ub = np.full(n, np.inf)
    out = set()
    for t in runs:
        c = empty()
        for g in runs[t]:
            c[idx[t, g]] = -1.0
        try:
            x, _ = solve_min(c, A_ub, b_ub, ub, lb=lb, method="simplex")
        except SolverError:  # not expected (the claims meet every row): close nobody
            return frozenset()
        if float(-c @ x) <= EPS:
            out.add(t)
    return frozenset(out)
