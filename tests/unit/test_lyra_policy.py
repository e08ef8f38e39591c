"""The ``lyra`` policy on the paper's examples and against an exhaustive optimum."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.model import ClusterSnapshot, Node, ThroughputModel, scaling
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.lyra.two_phase import LyraPolicy
from tests.unit.lyra_helpers import drive, optimum, snapshot, view, with_start

# Paper example: 8 GPUs; A: 50 s at 6 workers (300 worker-s), B: 20 s at 6 (120).
WORK, LO, HI, CAP = (300.0, 120.0), (2, 2), (6, 6), 8


@pytest.mark.parametrize(
    ("start", "jcts"),
    [((6, 2), (50.0, 53.333)), ((2, 6), (63.333, 20.0)), ((4, 4), (60.0, 30.0))],
)
def test_evaluator_reproduces_the_papers_jcts(
    start: tuple[int, int], jcts: tuple[float, ...]
) -> None:
    assert with_start(WORK, start, HI, CAP) == pytest.approx(jcts, abs=1e-3)


def test_lyra_reaches_the_best_average_on_the_paper_example() -> None:
    best = optimum(WORK, LO, HI, CAP) / 2
    assert best == pytest.approx(41.667, abs=1e-3)
    total, allocs = drive(get_policy("lyra", resize_cost_s=0.0), WORK, LO, HI, CAP)
    assert total / 2 == pytest.approx(best)
    assert dict(allocs[0].workers) == {"j0": ("v100", 2), "j1": ("v100", 6)}


def test_valuing_by_own_running_time_alone_picks_the_wrong_job() -> None:
    # Own running time reduction for 4 extra workers: A 150 -> 50 s, B 60 -> 20 s.
    gain_a = WORK[0] / 2 - WORK[0] / 6
    gain_b = WORK[1] / 2 - WORK[1] / 6
    assert gain_a > gain_b  # ... so that valuation gives the 4 spare GPUs to A:
    assert sum(with_start(WORK, (6, 2), HI, CAP)) / 2 > optimum(WORK, LO, HI, CAP) / 2 + 5


def test_a_job_capped_by_its_max_goes_first_even_though_it_is_longer() -> None:
    # Job 1 can never use more than 2 GPUs: every second it runs below 2 is lost for good.
    # Shortest-remaining-work-first (job 0 first) gives 26.875; the optimum is 26.
    work, lo, hi, cap = (21.0, 38.0), (2, 1), (4, 2), 5
    opt = optimum(work, lo, hi, cap)
    assert sum(with_start(work, (4, 1), hi, cap)) == pytest.approx(26.875)
    assert opt == pytest.approx(26.0)
    assert drive(LyraPolicy(resize_cost_s=0.0), work, lo, hi, cap)[0] == pytest.approx(opt)


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[float], list[int], list[int], int]:
    n = draw(st.integers(2, 3))
    cap = draw(st.integers(2, 8))
    lo = [draw(st.integers(1, 3)) for _ in range(n)]
    hi = [m + draw(st.integers(0, 4)) for m in lo]
    work = [float(draw(st.integers(1, 40))) for _ in range(n)]
    return work, lo, hi, cap


@settings(max_examples=150, deadline=None)
@given(inst=instances())
def test_lyra_matches_exhaustive_optimum_on_small_instances(
    inst: tuple[list[float], list[int], list[int], int],
) -> None:
    work, lo, hi, cap = inst
    if sum(lo) > cap:
        return  # not everything admitted at once: outside this evaluator's model
    got, _ = drive(LyraPolicy(resize_cost_s=0.0), work, lo, hi, cap)
    assert got == pytest.approx(optimum(work, lo, hi, cap), rel=1e-6, abs=1e-6)


def test_large_sets_use_local_search_and_stay_feasible() -> None:
    rnd = random.Random(3)
    jobs = [view(f"j{i}", rnd.uniform(10, 500), 1, rnd.randint(1, 6), 1) for i in range(12)]
    alloc = LyraPolicy().allocate(snapshot(jobs, 40))
    assert sum(w for _, w in alloc.workers.values()) <= 40
    for j in jobs:
        assert j.spec.min_workers <= alloc.workers[j.id][1] <= j.spec.max_workers


def test_base_demand_is_shortest_job_first_and_running_jobs_keep_their_minimum() -> None:
    running = view("r", 1000.0, 4, 4, workers=4)
    short, long_ = view("short", 10.0, 2, 2), view("long", 50.0, 2, 2)
    alloc = LyraPolicy().allocate(snapshot([running, long_, short], 6))
    assert set(alloc.workers) == {"r", "short"}


def _loan_snapshot(demand: int, lent: frozenset[str]) -> ClusterSnapshot:
    nodes = (Node("t0", "v100", 4), *(Node(f"i{k}", "t4", 1, "inference") for k in range(4)))
    job = view("e", 100.0, 1, 4, gpu="t4")
    return ClusterSnapshot(
        now=0.0,
        nodes=nodes,
        jobs=(job,),
        throughput_model=ThroughputModel(),
        serving_demand=demand,
        lent_nodes=lent,
    )


def test_idle_inference_servers_are_lent_and_used_by_elastic_jobs() -> None:
    alloc = LyraPolicy(reserve_fraction=0.0).allocate(_loan_snapshot(1, frozenset()))
    assert len(alloc.lend) == 3
    assert alloc.workers["e"] == ("t4", 3)
    assert set(alloc.preferred_nodes["e"][:3]) == set(alloc.lend)


def _guarded() -> LyraPolicy:
    return LyraPolicy(reserve_fraction=0.1, lend_after_s=None)


def test_a_reserve_of_idle_servers_stays_with_serving() -> None:
    # The reserve is a guard one asks for (docs/lyra.md: it costs queuing).
    # 4 servers, demand 1, reserve 10 % of 4 -> 1 server: lend 2, not 3.
    assert len(_guarded().allocate(_loan_snapshot(1, frozenset())).lend) == 2
    # Demand within the reserve reclaims nothing: 2 serving, demand 2.
    lent = frozenset({"i2", "i3"})
    assert _guarded().allocate(_loan_snapshot(2, lent)).lend == lent
    # Demand beyond it reclaims exactly what is missing.
    assert len(_guarded().allocate(_loan_snapshot(3, lent)).lend) == 1


def test_baseline_never_lends_and_basic_lends() -> None:
    snap = _loan_snapshot(1, frozenset())
    assert get_policy("lyra-baseline").allocate(snap).lend == frozenset()
    assert len(get_policy("basic").allocate(snap).lend) == 3


# ----------------------------------------------------------------------------- scaling curves


def test_shipped_curves_are_known_and_start_at_one() -> None:
    curves = scaling.known_curves()
    assert {"linear", "bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"} <= curves
    for c in curves:
        assert scaling.speedup(c, 1) == pytest.approx(1.0)
        assert scaling.speedup(c, 0) == 0.0
    assert scaling.speedup("linear", 7) == 7.0


def test_measured_curves_are_sublinear_and_flat_beyond_the_data() -> None:
    for c in scaling.known_curves() - {"linear"}:
        # (imagenet measures 2.01x on 2 GPUs: measurement noise, hence the 2 % slack)
        assert all(scaling.speedup(c, n) <= 1.02 * n for n in range(1, 65))
        assert scaling.speedup(c, 500) == scaling.speedup(c, 64)
    # Interpolated between measured points (16 and 20 workers are measured).
    lo, hi = scaling.speedup("bert", 16), scaling.speedup("bert", 20)
    assert min(lo, hi) <= scaling.speedup("bert", 18) <= max(lo, hi)
    with pytest.raises(KeyError, match="unknown scaling curve"):
        scaling.speedup("nope", 2)


def test_mckp_splits_gpus_when_curves_are_concave() -> None:
    # Two identical jobs with a saturating curve: a strict priority (4 + 1 workers) is
    # worse than splitting (2 + 3 or 3 + 2); the knapsack refinement must find the split.
    rates = (0.0, 1.0, 1.9, 2.6, 3.0)
    from lyra_ray.policies.lyra.flexible import share_spare
    from lyra_ray.policies.lyra.projection import FluidJob, project

    jobs = [FluidJob(100.0, 1, 4, rates), FluidJob(100.0, 1, 4, rates)]
    sizes = share_spare(jobs, 5)
    assert sorted(sizes) == [2, 3]
    assert project(jobs, sizes, 5, (0, 1)).total < project(jobs, (4, 1), 5, (0, 1)).total


def test_rigid_jobs_take_training_servers_and_elastic_jobs_lent_ones() -> None:
    """A rigid job on a lent server is preempted by its reclaim, an elastic one only
    shrinks: so each goes to its own tier first, whatever the servers' ids."""
    from lyra_ray import model as m
    from lyra_ray.model.throughput import SpecThroughputs
    from lyra_ray.policies.base import get_policy
    from lyra_ray.scheduling.core import SchedulerCore
    from tests.builders import job

    core = SchedulerCore(get_policy("lyra", reserve_fraction=0.0), SpecThroughputs())
    nodes = [m.Node("a-lent", "t4", 2, "inference"), m.Node("z-train", "t4", 2, "training")]
    events: list[m.Event] = [m.NodeUp(n) for n in nodes] + [m.ServingDemand(0)]
    events += [m.JobSubmitted("rigid", job("rigid", 1000, workers=2, tput={"t4": 1.0}))]
    core.step(0.0, events)
    assert core.lent == {"a-lent"}
    assert core.jobs["rigid"].current is not None
    assert core.jobs["rigid"].current.nodes == (("z-train", 2),)
    elastic = job("elastic", 1000, workers=1, max_workers=2, tput={"t4": 1.0})
    core.step(1.0, [m.JobSubmitted("elastic", elastic)])
    assert core.jobs["elastic"].current is not None
    assert core.jobs["elastic"].current.nodes == (("a-lent", 2),)
