"""Space sharing as the live scheduler sees it (#18): the catalogue's seeded pair rates,
and pair rates learnt from runs, kept apart from each job's rate alone."""

from __future__ import annotations

import math

import pytest

from lyra_ray.model.catalogue import CATALOGUE, KEEP_WHEN_SHARED, pair_rates
from lyra_ray.model.throughput import MeasuredThroughputs, catalogue_throughputs
from lyra_ray.policies.base import get_policy
from tests.builders import job
from tests.gavel_builders import job as view
from tests.gavel_builders import snapshot


def test_every_catalogue_pair_is_seeded_below_its_alone_rates() -> None:
    model = catalogue_throughputs()
    assert set(KEEP_WHEN_SHARED) == set(CATALOGUE)
    for a in CATALOGUE:
        for b in CATALOGUE:
            for g, alone in CATALOGUE[a].items():
                ja, jb = job("x", job_type=a), job("y", job_type=b)
                pa, pb = model.pair_throughput(ja, jb, g)  # type: ignore[misc]
                # measured (h200) pairs are clipped to the rate alone; estimates are below it
                assert 0 < pa <= alone and 0 < pb <= CATALOGUE[b][g]
                assert (pa, pb) == pair_rates(a, b, g)


def test_pairs_learnt_from_runs_replace_the_seed_per_side_and_survive_a_restart() -> None:
    model = MeasuredThroughputs(catalogue_throughputs())
    a, b = job("a", job_type="a3c"), job("b", job_type="lm")
    seeded = model.pair_throughput(a, b, "v100")
    assert seeded == pair_rates("a3c", "lm", "v100")
    model.observe_pair(a, b, "v100", 1.9)
    assert model.pair_throughput(a, b, "v100") == (1.9, seeded[1])  # type: ignore[index]
    assert model.pair_throughput(b, a, "v100") == (seeded[1], 1.9)  # type: ignore[index]
    # the rate beside a partner is not the job's rate alone
    assert model.throughput(a, "v100", 1) == CATALOGUE["a3c"]["v100"]
    again = MeasuredThroughputs(catalogue_throughputs())
    again.load_state(model.to_state())
    assert again.pair_throughput(a, b, "v100") == (1.9, seeded[1])  # type: ignore[index]


def test_a_pair_the_seed_lacks_is_offered_only_once_both_sides_were_measured() -> None:
    model = MeasuredThroughputs(catalogue_throughputs())
    a = job("a", tput={"v100": 1.0})  # no job type: the seed knows no pair for it
    b = job("b", tput={"v100": 1.0})
    assert model.pair_throughput(a, b, "v100") is None
    model.observe_pair(a, b, "v100", 0.7)
    assert model.pair_throughput(a, b, "v100") is None
    model.observe_pair(b, a, "v100", 0.6)
    assert model.pair_throughput(a, b, "v100") == (0.7, 0.6)
    model.observe_pair(b, a, "v100", 0.0)  # no rate is no measurement
    model.observe_pair(b, a, "v100", math.nan)
    assert model.pair_throughput(a, b, "v100") == (0.7, 0.6)


def test_a_packed_policy_pairs_two_catalogue_jobs_on_one_gpu() -> None:
    model = MeasuredThroughputs(catalogue_throughputs())
    jobs = [view(n, job_type=t) for n, t in (("a", "a3c"), ("b", "recommendation"))]
    alloc = get_policy("max_min_fairness_packed").allocate(snapshot(jobs, {"v100": 1}, model))
    assert sum(alloc.fractions.get("a+b", {}).values()) > 0.9, alloc.fractions


def test_a_seeded_pair_rate_follows_the_jobs_measured_speed_alone() -> None:
    model = MeasuredThroughputs(catalogue_throughputs())
    a, b = job("a", job_type="a3c"), job("b", job_type="lm")
    seeded = pair_rates("a3c", "lm", "v100")
    model.observe(a, "v100", 1, 10 * CATALOGUE["a3c"]["v100"])  # measured 10x the seed
    pa, pb = model.pair_throughput(a, b, "v100")  # type: ignore[misc]
    assert pa == pytest.approx(10 * seeded[0]) and pb == pytest.approx(seeded[1])
    # the share kept beside the partner is the seed's, on the measured scale
    assert pa / model.throughput(a, "v100", 1) == pytest.approx(KEEP_WHEN_SHARED["a3c"])


def test_two_jobs_of_one_type_pair_on_the_whole_gpu_once_one_was_measured() -> None:
    """Pair rates are looked up per class; a measured job is its own class (found live:
    the measured job's rates stood in for its unmeasured twin, and max-min fairness gave
    the pair only a quarter of the GPU)."""
    model = MeasuredThroughputs(catalogue_throughputs())
    model.observe(job("left", job_type="a3c"), "v100", 1, 9.3)  # ~4.6x the seed's 2.0
    jobs = [view(n, job_type="a3c") for n in ("left", "right")]
    assert model.pair_class(jobs[0].spec) != model.pair_class(jobs[1].spec)
    alloc = get_policy("max_min_fairness_packed").allocate(snapshot(jobs, {"v100": 1}, model))
    assert alloc.fractions["left+right"]["v100"] == pytest.approx(1.0, abs=1e-6), alloc.fractions
    model.observe(job("right", job_type="a3c"), "v100", 1, 9.5)
    alloc = get_policy("max_min_fairness_packed").allocate(snapshot(jobs, {"v100": 1}, model))
    assert alloc.fractions["left+right"]["v100"] == pytest.approx(1.0, abs=1e-6), alloc.fractions
