"""Packed (space-sharing) policies under Gavel's names, and Gandiva as Gavel runs it."""

from __future__ import annotations

import pytest

from lyra_ray.model import split_pair
from lyra_ray.policies.base import get_policy
from tests.gavel_builders import TableThroughputs, job, snapshot

ALONE = {n: {"v100": 1.0} for n in "abcd"}
GOOD_PAIRS = {("a", "b", "v100"): (0.8, 0.8), ("c", "d", "v100"): (0.8, 0.8)}


def _pairs(fractions: object) -> dict[str, float]:
    fr = dict(fractions)  # type: ignore[call-overload]
    return {k: sum(v.values()) for k, v in fr.items() if len(split_pair(k)) == 2}


def test_finish_time_fairness_packed_shares_gpus_when_pairs_gain() -> None:
    model = TableThroughputs(ALONE, GOOD_PAIRS)
    jobs = [job(n, total_steps=1000.0) for n in "abcd"]
    fr = get_policy("finish_time_fairness_packed").allocate(snapshot(jobs, {"v100": 2}, model))
    # Alone, four equal jobs get half a GPU each (0.5 steps/s); a pair gives each 0.8.
    thr = {n: 0.0 for n in "abcd"}
    for key, row in fr.fractions.items():
        members = split_pair(key)
        for m in members:
            per = 0.8 if len(members) == 2 else 1.0
            thr[m] += per * sum(row.values())
    assert min(thr.values()) == pytest.approx(0.8, abs=1e-4)
    assert sum(_pairs(fr.fractions).values()) == pytest.approx(2.0, abs=1e-4)


def test_finish_time_fairness_packed_state_round_trips() -> None:
    model = TableThroughputs(ALONE, GOOD_PAIRS)
    jobs = [job(n, total_steps=1000.0) for n in "abcd"]
    a, b = get_policy("finish_time_fairness_packed"), get_policy("finish_time_fairness_packed")
    a.allocate(snapshot(jobs, {"v100": 2}, model))
    b.load_state(a.to_state())
    later = [job(n, total_steps=1000.0, steps_done=200.0) for n in "abcd"]
    snap = snapshot(later, {"v100": 2}, model, now=500.0)
    assert a.allocate(snap) == b.allocate(snap)


def test_cost_packed_slos_meets_an_slo_only_a_fast_gpu_can() -> None:
    model = TableThroughputs(
        {"a": {"v100": 10.0, "k80": 1.0}, "b": {"v100": 10.0, "k80": 1.0}},
        {("a", "b", "v100"): (6.0, 6.0)},
    )
    jobs = [job("a", total_steps=5000.0, slo_s=1000.0), job("b", total_steps=10.0)]
    fr = (
        get_policy("max_sum_throughput_normalized_by_cost_packed_SLOs")
        .allocate(snapshot(jobs, {"v100": 1, "k80": 1}, model))
        .fractions
    )
    a = 10.0 * fr["a"]["v100"] + fr["a"]["k80"] + 6.0 * fr.get("a+b", {}).get("v100", 0.0)
    assert a >= 5.0 - 1e-6


def test_gandiva_packs_only_when_jobs_do_not_fit_and_keeps_its_pairs() -> None:
    model = TableThroughputs(ALONE, GOOD_PAIRS | {("a", "c", "v100"): (0.8, 0.8)})
    pol = get_policy("gandiva")
    jobs = [job(n, arrival=float(i)) for i, n in enumerate("abcd")]
    roomy = pol.allocate(snapshot(jobs, {"v100": 4}, model)).fractions
    assert not _pairs(roomy)
    assert all(roomy[n]["v100"] == pytest.approx(1.0) for n in "abcd")
    tight = pol.allocate(snapshot(jobs, {"v100": 2}, model)).fractions
    pairs = {k for k, v in _pairs(tight).items() if v > 0}
    assert pairs  # random pairing, some pair formed
    again = pol.allocate(snapshot(jobs, {"v100": 2}, model, now=400.0)).fractions
    assert {k for k, v in _pairs(again).items() if v > 0} == pairs
