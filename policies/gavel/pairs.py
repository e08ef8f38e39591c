"""Candidate job pairs for space sharing, pruned from O(n^2) to at most top-k per job.

Two jobs sharing GPUs each run slower than alone; sharing pays only if their
*normalised* co-located throughputs add up to more than 1 (``thr_a|b / T_a +
thr_b|a / T_b > 1`` on some GPU type). Gavel keeps every pair and builds an LP over all
of them, an LP that grows quadratically with the job count. Here a job keeps only its
``top_k`` best partners by that gain, and pair throughputs are looked up once per *job
class* — what the throughput model calls one (:meth:`ThroughputModel.pair_class`: the
catalogue's (job type, scale factor), plus the job's name once the live model measured
it), or the job itself when it has none — not once per job pair.

Mixed scale factors are allowed: a pair whose members differ in scale factor occupies
``max(sf_a, sf_b)`` GPUs when the throughput model offers such a pair (Gavel's catalogue
does not, so such pairs are simply absent).

``pair_set="all"`` keeps instead every pair the model offers a throughput for, gain or
not, as Gavel does: the yardstick that shows what pruning costs
(``benchmarks/packing_pairs.py``). A pair with gain <= 1 on every type is dominated
(time-sharing its members alone gets each more for fewer GPU-seconds), so the extra
pairs can only make the LP bigger, never its optimum worse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from lyra_ray.model import ClusterSnapshot, ThroughputModel, pair_key
from lyra_ray.policies.gavel.inputs import FloatArray, Problem

IntArray = NDArray[np.int64]
PairSet = Literal["pruned", "all"]
"""Which pairs a packed policy solves over: the ``top_k`` best partners per job, or every
pair the throughput model offers (Gavel's set)."""
PAIR_SETS: tuple[PairSet, ...] = ("pruned", "all")


def checked_pair_set(value: str) -> PairSet:
    """``value`` as a :data:`PairSet`; a typo in a policy's options fails when the policy
    is built, not at its first decision."""
    for s in PAIR_SETS:
        if value == s:
            return s
    raise ValueError(f"pair_set must be one of {PAIR_SETS}, not {value!r}")


@dataclass(frozen=True)
class Pairs:
    idx: IntArray
    """P x 2 row indices into the problem's jobs (a < b)."""
    thr: FloatArray
    """P x k x 2 steps/s of each member on each GPU type when co-located (0: cannot)."""
    gpus: FloatArray
    """GPUs each pair occupies."""
    keys: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(self.idx.shape[0])


def _classes(p: Problem, model: ThroughputModel) -> tuple[IntArray, list[int]]:
    """Class id per job (:meth:`ThroughputModel.pair_class`, else the job itself) and
    one representative row per class."""
    seen: dict[object, int] = {}
    reps: list[int] = []
    cls = np.zeros(p.n, dtype=np.int64)
    for i, job in enumerate(p.jobs):
        key = model.pair_class(job.spec)
        sig: object = ("job", job.id) if key is None else ("class", key)
        if sig not in seen:
            seen[sig] = len(reps)
            reps.append(i)
        cls[i] = seen[sig]
    return cls, reps


def candidate_pairs(
    snap: ClusterSnapshot, p: Problem, top_k: int = 8, pair_set: PairSet = "pruned"
) -> Pairs:
    pair_set = checked_pair_set(pair_set)
    model = snap.throughput_model
    cls, reps = _classes(p, model)
    c = len(reps)
    cthr = np.zeros((c, c, p.k, 2))
    for ca, ia in enumerate(reps):
        for cb, ib in enumerate(reps):
            if cb < ca:
                cthr[ca, cb] = cthr[cb, ca][:, ::-1]
                continue
            for j, gt in enumerate(p.gpu_types):
                pt = model.pair_throughput(p.jobs[ia].spec, p.jobs[ib].spec, gt)
                if pt is not None and pt[0] > 0 and pt[1] > 0:
                    cthr[ca, cb, j] = pt
    crep_T = p.T[reps]
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = cthr[..., 0] / crep_T[:, None, :] + cthr[..., 1] / crep_T[None, :, :]
    norm = np.nan_to_num(norm, nan=0.0, posinf=0.0)
    cgain = norm.max(axis=2)
    if pair_set == "all":
        offered: NDArray[np.bool_] = np.any(np.all(cthr > 0, axis=3), axis=2)
        idx = np.argwhere(np.triu(offered[cls[:, None], cls[None, :]], k=1)).astype(np.int64)
    else:
        idx = _top_k(cgain[cls[:, None], cls[None, :]], p.n, top_k)
    thr = cthr[cls[idx[:, 0]], cls[idx[:, 1]]] if idx.size else np.zeros((0, p.k, 2))
    gpus = np.maximum(p.sf[idx[:, 0]], p.sf[idx[:, 1]]) if idx.size else np.zeros(0)
    keys = tuple(pair_key(p.jobs[a].id, p.jobs[b].id) for a, b in idx)
    return Pairs(idx=idx, thr=thr, gpus=gpus, keys=keys)


def _top_k(gain: FloatArray, n: int, top_k: int) -> IntArray:
    """Sorted (a < b) pairs among each job's ``top_k`` partners of gain > 1."""
    np.fill_diagonal(gain, 0.0)
    gain[gain <= 1.0 + 1e-9] = 0.0
    chosen: set[tuple[int, int]] = set()
    kk = min(top_k, max(0, n - 1))
    if kk > 0:
        best = np.argsort(-gain, axis=1, kind="stable")[:, :kk]
        for a in range(n):
            for b in best[a]:
                if gain[a, b] > 0:
                    chosen.add((min(a, int(b)), max(a, int(b))))
    return np.array(sorted(chosen), dtype=np.int64).reshape(-1, 2)
