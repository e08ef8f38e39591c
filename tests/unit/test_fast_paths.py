"""The simulator's shortcuts change nothing: same schedule, same LP, bit for bit.

Each shortcut (the core's mid-round hold, held-back progress reports, cached job views,
the LAS LP built without scipy, a reused HiGHS instance) is checked against the plain
path it replaces, on random inputs, by exact equality rather than a tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray import model as m
from lyra_ray.model.state import JobState
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.gavel import lp
from lyra_ray.policies.gavel.inputs import build_problem
from lyra_ray.policies.gavel.max_min_fairness import las_coefficients
from lyra_ray.scheduling.core import Folded, SchedulerCore
from lyra_ray.sim.runtime import SimRuntime
from lyra_ray.sim.simulator import Simulator
from tests.builders import job, schedule
from tests.gavel_builders import random_snapshot

GPU = ["v100", "p100", "k80"]


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[m.Node], list[m.JobSpec]]:
    nodes = [
        m.Node(f"{g}-{i}", g, draw(st.integers(1, 2)))
        for g in GPU
        for i in range(draw(st.integers(1, 3)))
    ]
    specs = [
        job(
            f"j{i}",
            steps=draw(st.floats(10, 3000)),
            workers=draw(st.sampled_from([1, 1, 2])),
            arrival=draw(st.floats(0, 2000)),
            tput={g: draw(st.floats(0.5, 4)) for g in GPU},
        )
        for i in range(draw(st.integers(1, 14)))
    ]
    return nodes, specs


def _schedule(
    nodes: list[m.Node], specs: list[m.JobSpec], policy: str, shortcuts: bool
) -> list[tuple[Any, ...]]:
    sim = Simulator(nodes, get_policy(policy), SpecThroughputs(), round_s=120.0)
    core = sim.core
    if not shortcuts:  # every step takes the full cycle and reads every progress report
        core.decider.holds_mid_round = lambda state: False  # type: ignore[method-assign]
        core.decider.keeps_placement = lambda d, p: False  # type: ignore[method-assign]
    seen: list[tuple[Any, ...]] = []  # what policies saw at every round boundary
    fold, decide = core.fold, core.decide
    due: list[bool] = []

    def folded(now: float, events: list[m.Event]) -> Folded:
        due.append(core.round_due(now, events))
        return fold(now, events)

    def logged(f: Folded) -> m.Decision:
        out = decide(f)
        if due.pop():
            seen.append((core.now, core.snapshot().jobs, out.actions))
        return out

    core.fold = folded  # type: ignore[method-assign]
    core.decide = logged  # type: ignore[method-assign]
    res = sim.run(specs)
    return seen + schedule(res.jobs)


@settings(max_examples=25, deadline=None)
@given(
    workloads(),
    st.sampled_from(["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_nonpreemptive"]),
)
def test_mid_round_shortcuts_keep_the_schedule(
    w: tuple[list[m.Node], list[m.JobSpec]], policy: str
) -> None:
    nodes, specs = w
    assert _schedule(nodes, specs, policy, True) == _schedule(nodes, specs, policy, False)


@pytest.mark.parametrize(
    "policy", ["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_nonpreemptive"]
)
def test_mid_round_shortcuts_keep_a_crowded_schedule(policy: str) -> None:
    """More jobs than GPUs, arrivals and completions between round boundaries."""
    nodes = [m.Node("v100-0", "v100", 1), m.Node("k80-0", "k80", 2)]
    tput = {"v100": 2.0, "k80": 1.0}
    specs = [
        job(f"j{i}", 150.0 + 97.0 * i, workers=1 + i % 2, arrival=45.0 * i, tput=tput)
        for i in range(8)
    ]
    assert _schedule(nodes, specs, policy, True) == _schedule(nodes, specs, policy, False)


def test_the_core_holds_only_a_settled_fraction_allocation() -> None:
    core = SchedulerCore(get_policy("max_min_fairness_perf"), SpecThroughputs())
    assert not core.holds_mid_round()  # nothing placed yet
    nodes = [m.Node("v100-0", "v100", 1), m.Node("v100-1", "v100", 1)]
    events: list[m.Event] = [m.NodeUp(n) for n in nodes]
    events += [m.JobSubmitted("a", job("a", 100.0))]
    assert core.step(0.0, events).actions
    assert core.holds_mid_round()
    assert core.step(10.0, [m.JobSubmitted("b", job("b", 100.0))]).actions == ()
    assert core.jobs["b"].current is None  # b waits for the next round, as without the hold
    core.allocation = m.Allocation(workers={"a": ("v100", 1)})
    assert not core.holds_mid_round()  # integral workers may change mid-round


def test_held_back_progress_arrives_later_and_completions_never_wait() -> None:
    rt = SimRuntime(SpecThroughputs())
    rt.register("a", job("a", 100.0, tput={"v100": 1.0}))
    rt.register("b", job("b", 50.0, tput={"v100": 1.0}))
    rt.apply([m.Launch("a", m.Assignment("v100", 1)), m.Launch("b", m.Assignment("v100", 1))])
    rt.advance(50.0)
    assert rt.poll(progress=False) == [m.JobCompleted("b", 50.0)]
    rt.advance(60.0)
    assert rt.poll() == [m.JobsProgress({"a": 60.0})]
    assert rt.poll() == []


def test_a_cached_view_is_reused_until_the_job_changes() -> None:
    j = JobState("a", job("a"), arrival_s=0.0)
    first = j.view()
    assert j.view() is first
    j.attained_service_s += 5.0
    j.time_received_s["v100"] = 5.0
    second = j.view()
    assert second is not first and second.attained_service_s == 5.0
    assert second.time_received_s == {"v100": 5.0}
    assert second.time_received_s is not j.time_received_s  # a copy: the view stays frozen
    plain = m.JobView(
        j.id,
        j.spec,
        j.arrival_s,
        j.status,
        j.steps_done,
        j.attained_service_s,
        {"v100": 5.0},
        j.throughput,
        j.current,
        j.first_start_s,
        j.num_preemptions,
    )
    assert second == plain


@pytest.mark.parametrize("seed", range(6))
def test_las_lp_without_scipy_is_the_same_lp(seed: int) -> None:
    p = build_problem(random_snapshot(12 + 7 * seed, seed=seed))
    coef = las_coefficients(p, agnostic=seed % 2 == 1)
    ub = p.runnable.astype(np.float64).ravel()
    active = np.asarray(p.runnable.any(axis=1))
    A, b = lp.base_constraints(p.sf, p.capacity)
    plain = lp.max_min(
        lp.utility_matrix(coef), A, b, ub, active, np.zeros(p.n), method="ipm-interior"
    )
    fast = lp.max_min_jobs(coef, p.sf, p.capacity, ub, active, method="ipm-interior")
    assert np.array_equal(plain.x, fast.x)
    assert plain.level == fast.level
    assert np.array_equal(plain.duals, fast.duals)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.data())
def test_csc_arrays_match_scipy(nrow: int, ncol: int, data: st.DataObject) -> None:
    cells = data.draw(
        st.lists(st.tuples(st.integers(0, nrow - 1), st.integers(0, ncol - 1)), max_size=30)
    )
    rows = np.array([r for r, _ in cells], dtype=np.int64)
    cols = np.array([c for _, c in cells], dtype=np.int64)
    vals = np.arange(len(cells), dtype=np.float64) - 3.0  # includes an explicit zero
    got = lp._csc_arrays(rows, cols, vals, ncol)
    if len(set(cells)) < len(cells):
        assert got is None  # scipy would sum the repeats: the caller goes through scipy
        return
    ref = sp.csc_matrix(sp.csr_matrix((vals, (rows, cols)), shape=(nrow, ncol)))
    assert got is not None
    for mine, theirs in zip(got, (ref.indptr, ref.indices, ref.data), strict=True):
        assert np.array_equal(mine, theirs)


def test_a_reused_highs_instance_solves_like_a_fresh_one() -> None:
    p = build_problem(random_snapshot(20, seed=3))
    coef = las_coefficients(p, agnostic=False)
    ub = p.runnable.astype(np.float64).ravel()
    active = np.asarray(p.runnable.any(axis=1))
    first = lp.max_min_jobs(coef, p.sf, p.capacity, ub, active, method="ipm-interior")
    lp.max_min_jobs(coef[:5], p.sf[:5], p.capacity, ub[:15], active[:5], method="simplex")
    again = lp.max_min_jobs(coef, p.sf, p.capacity, ub, active, method="ipm-interior")
    assert np.array_equal(first.x, again.x)


_parts = st.sampled_from([(), (("k80", 1),), (("p100", 2),)])
_assignments = st.builds(
    m.Assignment,
    gpu_type=st.sampled_from(["v100", "k80"]),
    workers=st.integers(1, 2),
    nodes=st.sampled_from([(), (("n0", 1),), (("n0", 1), ("n1", 1))]),
    partner=st.sampled_from([None, "j2"]),
    extra=_parts,
)


@settings(max_examples=300, deadline=None)
@given(p=st.none() | _assignments, a=_assignments)
def test_the_diffs_inline_comparison_is_assignment_equality(
    p: m.Assignment | None, a: m.Assignment
) -> None:
    from lyra_ray.scheduling.diff import _differs

    assert _differs(p, a) == (p != a)
    assert _differs(a, a) is False
