"""Gavel policies on hand-checkable instances, plus registry and invariants."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.model import Allocation, ClusterSnapshot, split_pair
from lyra_ray.policies.base import available_policies, get_policy
from lyra_ray.policies.gavel.inputs import build_problem
from lyra_ray.policies.gavel.pairs import candidate_pairs
from tests.gavel_builders import TableThroughputs, job, random_snapshot, snapshot

GAVEL_NAMES = [
    "max_min_fairness",
    "max_min_fairness_perf",
    "max_min_fairness_packed",
    "finish_time_fairness",
    "finish_time_fairness_perf",
    "fifo",
    "fifo_perf",
    "fifo_packed",
    "finish_time_fairness_packed",
    "max_sum_throughput_normalized_by_cost_packed_SLOs",
    "min_total_duration",
    "min_total_duration_perf",
    "min_total_duration_packed",
    "max_sum_throughput_perf",
    "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
    "max_min_fairness_water_filling",
    "max_min_fairness_water_filling_perf",
    "max_min_fairness_water_filling_packed",
    "isolated",
    "gandiva",
    "allox",
]


def _check(snap: ClusterSnapshot, alloc: Allocation, overcommit: bool = False) -> None:
    """No job over time 1, no GPU type over capacity (unless ``overcommit``: Gavel's
    agnostic FIFO gives more jobs a type than it has GPUs, see policies/gavel/fifo.py),
    nothing where it cannot run."""
    gpus = snap.gpus_by_type()
    per_job: dict[str, float] = {}
    used = dict.fromkeys(gpus, 0.0)
    for key, row in alloc.fractions.items():
        members = split_pair(key)
        sf = max(snap.job(m).spec.min_workers for m in members)
        for g, x in row.items():
            assert x >= 0
            used[g] += sf * x
            if x > 1e-9:
                assert all(snap.throughput(snap.job(m), g) > 0 for m in members)
        for m in members:
            per_job[m] = per_job.get(m, 0.0) + sum(row.values())
    assert all(v <= 1 + 1e-6 for v in per_job.values())
    assert overcommit or all(used[g] <= gpus[g] + 1e-6 for g in gpus)
    for jid, (g, w) in alloc.workers.items():
        used[g] += 0  # integral answers are checked below
        assert w == snap.job(jid).spec.min_workers
    for g in gpus:
        assert sum(w for gg, w in alloc.workers.values() if gg == g) <= gpus[g]


def test_every_gavel_name_is_registered() -> None:
    names = set(available_policies())
    assert set(GAVEL_NAMES) <= names


@pytest.mark.parametrize("name", GAVEL_NAMES)
def test_policy_invariants_on_a_random_cluster(name: str) -> None:
    snap = random_snapshot(24, seed=7)
    alloc = get_policy(name).allocate(snap)
    _check(snap, alloc, overcommit=name == "fifo")
    assert alloc.fractions or alloc.workers


@pytest.mark.parametrize("name", GAVEL_NAMES)
def test_empty_cluster_gives_empty_allocation(name: str) -> None:
    snap = snapshot([], {"v100": 2}, TableThroughputs({}))
    alloc = get_policy(name).allocate(snap)
    assert not alloc.fractions and not alloc.workers


def test_agnostic_las_splits_one_gpu_evenly() -> None:
    model = TableThroughputs({"a": {"v100": 1.0}, "b": {"v100": 3.0}})
    snap = snapshot([job("a"), job("b")], {"v100": 1}, model)
    alloc = get_policy("max_min_fairness").allocate(snap)
    assert alloc.fractions["a"]["v100"] == pytest.approx(0.5, abs=1e-6)
    assert alloc.fractions["b"]["v100"] == pytest.approx(0.5, abs=1e-6)


def test_heterogeneity_aware_las_sends_each_job_where_it_gains_most() -> None:
    # a speeds up 4x on the v100, b not at all: het-aware LAS gives a the v100 and b the k80
    model = TableThroughputs({"a": {"v100": 4.0, "k80": 1.0}, "b": {"v100": 1.0, "k80": 1.0}})
    snap = snapshot([job("a"), job("b")], {"v100": 1, "k80": 1}, model)
    alloc = get_policy("max_min_fairness_perf").allocate(snap)
    # iso throughputs (equal split): a 2.5, b 1. b's normalised throughput is capped at 1
    # (its whole time), so the optimum level is 1 and needs 1.6 x_a,v100 + 0.4 x_a,k80 >= 1
    # with x_b,v100 + x_b,k80 = 1: every optimum gives a >= 0.625 of the v100.
    x = alloc.fractions
    assert x["a"]["v100"] >= 0.625 - 1e-5
    assert x["b"]["v100"] <= 0.375 + 1e-5
    assert x["b"]["v100"] + x["b"]["k80"] == pytest.approx(1.0, abs=1e-5)


def test_weights_scale_las_shares() -> None:
    model = TableThroughputs({"a": {"v100": 1.0}, "b": {"v100": 1.0}})
    snap = snapshot([job("a", weight=3.0), job("b")], {"v100": 1}, model)
    alloc = get_policy("max_min_fairness").allocate(snap)
    assert alloc.fractions["a"]["v100"] == pytest.approx(0.75, abs=1e-5)


def test_makespan_gives_the_long_job_more_time() -> None:
    model = TableThroughputs({"a": {"v100": 1.0}, "b": {"v100": 1.0}})
    snap = snapshot([job("a", total_steps=300), job("b", total_steps=100)], {"v100": 1}, model)
    alloc = get_policy("min_total_duration_perf").allocate(snap)
    # Gavel's X: an interior point at a makespan within 5 % of the optimum (400 s), so
    # a gets at least 300/420 of the GPU, b at least 100/420, and together at most all.
    a, b = alloc.fractions["a"]["v100"], alloc.fractions["b"]["v100"]
    assert a >= 300 / 420 - 1e-6 and b >= 100 / 420 - 1e-6
    assert a + b <= 1 + 1e-6
    assert a > 2.5 * b


def test_water_filling_gives_entities_equal_shares_and_is_pareto() -> None:
    # user x has 3 jobs, user y has 1: each user gets half the GPU time
    model = TableThroughputs({j: {"v100": 1.0} for j in "abcd"})
    jobs = [job("a", user="x"), job("b", user="x"), job("c", user="x"), job("d", user="y")]
    snap = snapshot(jobs, {"v100": 2}, model)
    alloc = get_policy("max_min_fairness_water_filling").allocate(snap)
    fx = sum(alloc.fractions[j]["v100"] for j in "abc")
    assert fx == pytest.approx(1.0, abs=1e-5)
    assert alloc.fractions["d"]["v100"] == pytest.approx(1.0, abs=1e-5)


def test_fifo_keeps_arrival_order_and_perf_picks_the_fastest_type() -> None:
    model = TableThroughputs(
        {j: {"v100": 3.0, "k80": 1.0} for j in ("a", "b", "c")},
    )
    jobs = [job("a", arrival=0.0), job("b", arrival=1.0), job("c", arrival=2.0, sf=2)]
    snap = snapshot(jobs, {"v100": 1, "k80": 1}, model)
    alloc = get_policy("fifo_perf").allocate(snap)
    x = alloc.fractions
    assert x["a"] == {"k80": 0.0, "v100": 1.0}
    assert x["b"] == {"k80": 1.0, "v100": 0.0}
    assert x["c"] == {"k80": 0.0, "v100": 0.0}  # c (2 GPUs) waits


def test_cost_policy_meets_slos_on_expensive_gpus_only_when_needed() -> None:
    model = TableThroughputs({"a": {"v100": 10.0, "k80": 1.0}, "b": {"v100": 10.0, "k80": 1.0}})
    tight = [job("a", total_steps=5000, slo_s=1000.0), job("b", total_steps=10)]
    snap = snapshot(tight, {"v100": 1, "k80": 1}, model)
    with_slo = get_policy("max_sum_throughput_normalized_by_cost_perf_SLOs").allocate(snap)
    # a needs 5 steps/s: at least half its time on the v100
    a = with_slo.fractions["a"]
    assert 10.0 * a["v100"] + 1.0 * a["k80"] >= 5.0 - 1e-6


def test_allox_runs_the_shortest_job_first() -> None:
    model = TableThroughputs({"long": {"v100": 1.0}, "short": {"v100": 1.0}})
    jobs = [job("long", total_steps=1000), job("short", total_steps=10)]
    snap = snapshot(jobs, {"v100": 1}, model)
    alloc = get_policy("allox").allocate(snap)
    assert alloc.fractions["short"]["v100"] == 1.0
    assert alloc.fractions["long"]["v100"] == 0.0


def _pair_model(mixed: bool) -> tuple[ClusterSnapshot, TableThroughputs]:
    alone = {j: {"v100": 1.0} for j in "abc"}
    pairs = {("a", "b", "v100"): (0.8, 0.8), ("a", "c", "v100"): (0.3, 0.3)}
    model = TableThroughputs(alone, pairs)
    jobs = [job("a"), job("b", sf=2 if mixed else 1), job("c")]
    return snapshot(jobs, {"v100": 2}, model), model


def test_pairs_keep_only_gainful_partners() -> None:
    snap, _ = _pair_model(mixed=False)
    pairs = candidate_pairs(snap, build_problem(snap), top_k=4)
    assert pairs.keys == ("a+b",)  # a+c loses (0.3 + 0.3 < 1)


@pytest.mark.parametrize("mixed", [False, True])
def test_packed_las_uses_the_pair_and_handles_mixed_scale_factors(mixed: bool) -> None:
    snap, _ = _pair_model(mixed)
    alloc = get_policy("max_min_fairness_packed").allocate(snap)
    _check(snap, alloc)
    assert "a+b" in alloc.fractions
    thr = {j: 0.0 for j in "abc"}
    for key, row in alloc.fractions.items():
        x = row.get("v100", 0.0)
        if key == "a+b":
            thr["a"] += 0.8 * x
            thr["b"] += 0.8 * x
        else:
            thr[key] += x
    assert min(thr.values()) > 0


def test_finish_time_fairness_equalises_rho() -> None:
    # one GPU, two jobs: at the optimum both finish-time ratios are equal
    from lyra_ray.policies.gavel.finish_time_fairness import ftf_inputs, rho_of, solve_ftf

    model = TableThroughputs({"old": {"v100": 1.0}, "new": {"v100": 2.0}})
    jobs = [job("old", total_steps=1000, arrival=0.0), job("new", total_steps=3000, arrival=500)]
    snap = snapshot(jobs, {"v100": 1}, model, now=1000.0)
    p = build_problem(snap)
    X, rho = solve_ftf(p, snap.now)
    rhos = rho_of(p, X, *ftf_inputs(p, snap.now))
    assert rhos[0] == pytest.approx(rhos[1], rel=1e-6)
    assert rho == pytest.approx(float(rhos.max()), rel=1e-9)
    assert X.sum() == pytest.approx(1.0, abs=1e-6)


def test_isolated_is_an_equal_split() -> None:
    model = TableThroughputs({j: {"v100": 1.0, "k80": 1.0} for j in "abcd"})
    snap = snapshot([job(j) for j in "abcd"], {"v100": 2, "k80": 2}, model)
    alloc = get_policy("isolated").allocate(snap)
    xs = np.array([[alloc.fractions[j][g] for g in ("k80", "v100")] for j in "abcd"])
    assert np.allclose(xs, 0.5)
