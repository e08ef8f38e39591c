"""``pair_set="all"``: packed policies on every pair (Gavel's set) instead of the pruned
top-k partners — what ``benchmarks/packing_pairs.py`` measures pruning against."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lyra_ray.model import ClusterSnapshot, GpuType, split_pair
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.gavel.inputs import build_problem
from lyra_ray.policies.gavel.packed import solve_packed_las
from lyra_ray.policies.gavel.pairs import candidate_pairs
from tests.gavel_builders import TableThroughputs, job, snapshot

PACKED = (
    "max_min_fairness_packed",
    "min_total_duration_packed",
    "max_min_fairness_water_filling_packed",
    "finish_time_fairness_packed",
    "max_sum_throughput_normalized_by_cost_packed_SLOs",
)


def _tiny() -> ClusterSnapshot:
    """Four jobs whose every pair gains (0.8 + 0.8 > 1): the pruned set is all of them."""
    names = "abcd"
    alone = {n: {"v100": 1.0, "k80": 0.4} for n in names}
    pairs = {(a, b, "v100"): (0.8, 0.8) for i, a in enumerate(names) for b in names[i + 1 :]}
    jobs = [job(n, total_steps=1000.0 * (i + 1)) for i, n in enumerate(names)]
    return snapshot(jobs, {"v100": 2, "k80": 1}, TableThroughputs(alone, pairs), now=10.0)


def _random(seed: int, n: int = 24) -> ClusterSnapshot:
    """Jobs with random pair rates, some pairs worth forming and some not."""
    rng = random.Random(seed)
    names = [f"j{i}" for i in range(n)]
    alone = {m: {"v100": rng.uniform(1, 3), "p100": rng.uniform(0.5, 1.5)} for m in names}
    pairs: dict[tuple[str, str, GpuType], tuple[float, float]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for g in ("v100", "p100"):
                pairs[(a, b, g)] = (
                    alone[a][g] * rng.uniform(0.2, 0.9),
                    alone[b][g] * rng.uniform(0.2, 0.9),
                )
    jobs = [job(m, total_steps=rng.uniform(1e3, 1e5), weight=rng.choice((1.0, 2.0))) for m in names]
    return snapshot(jobs, {"v100": 4, "p100": 4}, TableThroughputs(alone, pairs), now=100.0)


def test_all_equals_pruned_when_pruning_kept_every_pair() -> None:
    snap = _tiny()
    p = build_problem(snap)
    pruned, full = candidate_pairs(snap, p), candidate_pairs(snap, p, pair_set="all")
    assert pruned.keys == full.keys and pruned.size == 6
    for name in PACKED:
        default = get_policy(name).allocate(snap)
        assert get_policy(name, pair_set="all").allocate(snap) == default, name


@pytest.mark.parametrize("seed", range(4))
def test_full_set_holds_the_pruned_one_and_never_does_worse(seed: int) -> None:
    snap = _random(seed)
    p = build_problem(snap)
    pruned = candidate_pairs(snap, p, top_k=1)
    full = candidate_pairs(snap, p, top_k=1, pair_set="all")
    assert set(pruned.keys) < set(full.keys)
    assert full.size == p.n * (p.n - 1) // 2  # gain or not, as Gavel keeps them
    level_pruned = solve_packed_las(snap, p, top_k=1)[1]
    level_full = solve_packed_las(snap, p, top_k=1, pair_set="all")[1]
    assert level_full >= level_pruned * (1 - 1e-7)


def test_full_set_never_worse_for_the_makespan_policy() -> None:
    """Also through a policy's own allocate: the full set's allocation reaches at least
    the pruned one's worst throughput / remaining steps."""
    snap = _random(7)
    p = build_problem(snap)
    model = snap.throughput_model
    r = np.array([j.remaining_steps for j in p.jobs])

    def worst(pair_set: str) -> float:
        alloc = get_policy("min_total_duration_packed", top_k=1, pair_set=pair_set).allocate(snap)
        thr = np.zeros(p.n)
        row = {j.id: i for i, j in enumerate(p.jobs)}
        for key, xs in alloc.fractions.items():
            ids = split_pair(key)
            for g, x in xs.items():
                if len(ids) == 1:
                    thr[row[key]] += x * p.T[row[key], p.gpu_types.index(g)]
                    continue
                a, b = row[ids[0]], row[ids[1]]
                pt = model.pair_throughput(p.jobs[a].spec, p.jobs[b].spec, g)
                assert pt is not None
                thr[a] += x * pt[0]
                thr[b] += x * pt[1]
        return float((thr / r).min())

    assert worst("all") >= worst("pruned") * (1 - 1e-6)


def test_default_is_pruned_and_a_bad_pair_set_fails_when_built() -> None:
    for name in PACKED:
        assert vars(get_policy(name))["pair_set"] == "pruned"
    with pytest.raises(ValueError, match="pair_set"):
        get_policy("max_min_fairness_packed", pair_set="everything")
