"""Turn a :class:`ClusterSnapshot` into the dense arrays Gavel's LPs are written over.

Every Gavel policy sees the same few arrays: the throughput matrix ``T`` (jobs x GPU
types, steps/s of the job at its scale factor), the scale factors, the priority weights
and the GPU count per type. Building them once here keeps the policy files about the
optimisation problem only, and makes "heterogeneity-agnostic" one flag: Gavel's agnostic
variants replace every non-zero throughput by 1.0, so the solver cannot tell GPU types
apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import Allocation, ClusterSnapshot, GpuType, JobId, JobStatus, JobView, Node
from lyra_ray.model.team_bounds import TeamBounds

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Problem:
    """The LP data of one snapshot. Row ``i`` of every per-job array is ``jobs[i]``."""

    jobs: tuple[JobView, ...]
    gpu_types: tuple[GpuType, ...]
    T: FloatArray
    """steps/s of job i on GPU type j at its scale factor (0: cannot run there)."""
    sf: FloatArray
    weights: FloatArray
    capacity: FloatArray
    bounds: TeamBounds | None = None
    """Teams' quotas (the snapshot's ``team_bounds``): the rows in ``bounds.rows`` join
    the LP's constraints (:mod:`lyra_ray.policies.gavel.team_rows`), and each job's
    entity is its team (:meth:`entity`)."""

    @property
    def n(self) -> int:
        return len(self.jobs)

    @property
    def k(self) -> int:
        return len(self.gpu_types)

    @property
    def job_ids(self) -> tuple[JobId, ...]:
        return tuple(j.id for j in self.jobs)

    def entity(self, i: int) -> str:
        """Job ``i``'s entity for hierarchical policies: its team, else its owner."""
        job = self.jobs[i]
        return job.spec.user if self.bounds is None else self.bounds.team(job.id, job.spec.user)

    @cached_property
    def closed(self) -> NDArray[np.bool_]:
        """Jobs of the teams the quota rows leave no GPU (none without rows): out of the
        optimisation, as jobs that fit nowhere (:mod:`lyra_ray.policies.teams.reach`)."""
        b = self.bounds
        out: NDArray[np.bool_] = np.zeros(self.n, dtype=bool)
        if b is not None and b.rows and b.closed:
            for i, j in enumerate(self.jobs):
                out[i] = b.team(j.id, j.spec.user) in b.closed
        return out

    @property
    def team_rows(self) -> bool:
        """Whether team rows are to join this LP."""
        return self.bounds is not None and bool(self.bounds.rows)

    @cached_property
    def runnable(self) -> NDArray[np.bool_]:
        """Where X may be positive: the job has throughput there and fits the type.

        Computed once per problem (a solve reads it several times) and read-only, as the
        arrays it comes from are never edited."""
        out = (self.T > 0) & (self.sf[:, None] <= self.capacity[None, :]) & ~self.closed[:, None]
        out.flags.writeable = False
        return out


def build_problem(snap: ClusterSnapshot, agnostic: bool = False) -> Problem:
    """Arrays over the snapshot's active jobs (snapshot order) and training GPU types."""
    gpus, types = _gpu_counts(snap)
    a, b, c = _DONE  # ``snap.active_jobs`` by identity (hashing an enum member runs Python)
    jobs = tuple([j for j in snap.jobs if not (j.status is a or j.status is b or j.status is c)])
    n, k = len(jobs), len(types)
    # A list, then one array at the end (numpy item writes are slow one by one), from the
    # core's cached steps/s rows; a job whose row lacks a type asks the throughput model.
    try:
        vals = [job.throughput[gt] for job in jobs for gt in types]
    except KeyError:
        vals = [
            row[gt] if gt in row else snap.throughput(job, gt)
            for job in jobs
            for row in (job.throughput,)
            for gt in types
        ]
    T = np.maximum(np.array(vals, dtype=np.float64).reshape(n, k), 0.0)
    sf = np.array([float(max(1, j.spec.min_workers)) for j in jobs]).reshape(n)
    w = np.array([float(j.spec.priority_weight) for j in jobs]).reshape(n)
    w = np.where(w > 0, w, 1.0)
    cap = np.array([float(gpus[t]) for t in types]).reshape(k)
    if agnostic:
        T = (T > 0).astype(np.float64)
    return Problem(
        jobs=jobs, gpu_types=types, T=T, sf=sf, weights=w, capacity=cap, bounds=snap.team_bounds
    )


_DONE = (JobStatus.FINISHED, JobStatus.CANCELLED, JobStatus.FAILED)
_GpuMemo = tuple[tuple[Node, ...], frozenset[str], dict[GpuType, int], tuple[GpuType, ...]]
_gpu_memo: list[_GpuMemo] = []
"""The last snapshot's node tuple and loans, with their GPU counts and types: the core
hands every snapshot the same node tuple until a node comes or goes, and the counts
walk every node (hundreds on a large cluster) at every solve."""


def _gpu_counts(snap: ClusterSnapshot) -> tuple[dict[GpuType, int], tuple[GpuType, ...]]:
    """``snap.gpus_by_type()`` (never edited by a caller) and the types with GPUs, sorted."""
    if _gpu_memo:
        nodes, lent, gpus, types = _gpu_memo[0]
        if nodes is snap.nodes and lent == snap.lent_nodes:
            return gpus, types
    gpus = snap.gpus_by_type()
    types = tuple(sorted(t for t, c in gpus.items() if c > 0))
    _gpu_memo[:] = [(snap.nodes, snap.lent_nodes, gpus, types)]
    return gpus, types


def isolated_allocation(sf: FloatArray, capacity: FloatArray, feasible: bool = False) -> FloatArray:
    """Gavel's "isolated" split: each of n jobs gets 1/n of every type, per its GPUs.

    ``X_ij = cap_j / (n sf_i)``, then every row divided by the largest row sum — exactly
    Gavel's normalisation, which also scales *up* when the cluster has more GPUs than
    jobs need (or, with few GPUs, over-commits them): it is only the yardstick that LAS
    and finish-time fairness normalise by. ``feasible=True`` only ever scales down and
    then also respects capacity, for use as an actual allocation.
    """
    n = sf.shape[0]
    if n == 0:
        return np.zeros((0, capacity.shape[0]))
    x: FloatArray = (capacity / n)[None, :] / sf[:, None]  # np.tile rows, broadcast: same values
    top = float(x.sum(axis=1).max())
    if feasible:
        return x / top if top > 1 else x
    return x / top if top > 0 else x


def to_allocation(
    problem: Problem,
    X: FloatArray,
    pairs: Mapping[str, FloatArray] | None = None,
    tol: float = 1e-9,
) -> Allocation:
    """Gavel's X as an :class:`Allocation`; entries below ``tol`` are dropped as noise."""
    types = problem.gpu_types
    clipped = np.clip(X, 0.0, 1.0)
    # Python floats, same values; entries at or below ``tol`` become 0.0.
    rows: list[list[float]] = np.where(clipped > tol, clipped, 0.0).tolist()
    jobs = problem.jobs
    fractions: dict[str, dict[GpuType, float]] = {
        job.id: dict(zip(types, xs, strict=True)) for job, xs in zip(jobs, rows, strict=False)
    }
    for key, row in (pairs or {}).items():
        row = np.clip(row, 0.0, 1.0)
        if float(row.max(initial=0.0)) > tol:
            fractions[key] = {
                gt: float(row[j]) if row[j] > tol else 0.0 for j, gt in enumerate(problem.gpu_types)
            }
    return Allocation(fractions=fractions)


def effective_throughput(problem: Problem, X: FloatArray) -> FloatArray:
    """Gavel's ``throughput(m, X) = sum_j T_mj X_mj`` for every job (no pairs)."""
    return np.asarray((problem.T * X).sum(axis=1), dtype=np.float64)
