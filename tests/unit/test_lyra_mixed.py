"""Jobs whose workers span GPU types: the throughput model, the types, placement, diff."""

from __future__ import annotations

import json

import pytest

from lyra_ray import model as m
from lyra_ray.model import Allocation, Assignment, ClusterSnapshot, JobSpec, Node, scaling
from lyra_ray.model.mixed import batch_shares, can_mix, mixed_throughput
from lyra_ray.model.state import (
    JobState,
    allocation_from_dict,
    allocation_to_dict,
    assignment_from_dict,
    assignment_to_dict,
)
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.placement.placer import ConsolidatingPlacer
from lyra_ray.scheduling.diff import job_actions
from lyra_ray.sim.runtime import SimRuntime

MODEL = SpecThroughputs()


def spec(curve: str = "linear", lo: int = 1, hi: int = 4) -> JobSpec:
    return JobSpec(
        name="x",
        total_steps=1000.0,
        min_workers=lo,
        max_workers=hi,
        throughput={"v100": 1.0, "t4": 0.4},
        scaling=curve,
    )


# ----------------------------------------------------------------------------- the model


def test_one_type_is_the_single_type_model() -> None:
    for curve in ("linear", "bert", "imagenet"):
        s = spec(curve)
        for n in (1, 2, 3):
            assert mixed_throughput(MODEL, s, [("v100", n)]) == MODEL.throughput(s, "v100", n)


def test_linear_scaling_adds_the_workers_speeds() -> None:
    assert mixed_throughput(MODEL, spec(), [("v100", 1), ("t4", 1)]) == pytest.approx(1.4)
    assert mixed_throughput(MODEL, spec(), [("v100", 2), ("t4", 3)]) == pytest.approx(3.2)


def test_measured_curves_pay_for_spanning_two_servers() -> None:
    # bert: 2 workers on two servers speed up 1.0056x (on one: 1.97x); one V100 plus one
    # T4 trains at (1 + 0.4) * 1.0056 / 2 of a V100: slower than the V100 alone.
    s = spec("bert")
    assert scaling.spread_speedup("bert", 2) == pytest.approx(1.0056)
    mixed = mixed_throughput(MODEL, s, [("v100", 1), ("t4", 1)])
    assert mixed == pytest.approx(1.4 * 1.0056 / 2)
    assert mixed < MODEL.throughput(s, "v100", 1)
    # imagenet crosses servers well (1.70x for two): a T4 worker helps.
    assert mixed_throughput(MODEL, spec("imagenet"), [("v100", 1), ("t4", 1)]) > 1.0


def test_which_part_is_the_base_does_not_change_the_rate() -> None:
    s = spec("deepspeech2")
    a = mixed_throughput(MODEL, s, [("v100", 2), ("t4", 1)])
    assert a == pytest.approx(mixed_throughput(MODEL, s, [("t4", 1), ("v100", 2)]))


def test_jobs_that_cannot_mix() -> None:
    planned = JobSpec(
        name="p",
        total_steps=10.0,
        min_workers=1,
        max_workers=2,
        throughput_by_size={"v100": {1: 1.0, 2: 2.0}, "t4": {1: 0.4, 2: 0.8}},
    )
    assert not can_mix(planned) and not can_mix(spec(lo=2, hi=2)) and can_mix(spec())
    assert mixed_throughput(MODEL, planned, [("v100", 1), ("t4", 1)]) == 0.0
    k80_less = spec()  # no k80 throughput: a worker there would do nothing
    assert mixed_throughput(MODEL, k80_less, [("v100", 1), ("k80", 1)]) == 0.0


def test_batch_shares_follow_speed_and_sum_to_one() -> None:
    shares = batch_shares({"v100": 1.0, "t4": 0.4}, [("v100", 2), ("t4", 3)])
    assert shares == pytest.approx({"v100": 1 / 3.2, "t4": 0.4 / 3.2})
    assert 2 * shares["v100"] + 3 * shares["t4"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------- types, state

MIXED = Assignment("v100", 3, (("t0", 1), ("v0", 2)), extra=(("t4", 1),))


def test_parts_put_the_base_first() -> None:
    assert MIXED.parts == (("v100", 2), ("t4", 1))
    assert Assignment("v100", 2).parts == (("v100", 2),)


def test_assignment_and_allocation_round_trip_and_old_states_read_alike() -> None:
    d = assignment_to_dict(MIXED)
    assert assignment_from_dict(json.loads(json.dumps(d))) == MIXED
    plain = assignment_to_dict(Assignment("v100", 2, (("v0", 2),)))
    assert plain is not None and "extra" not in plain  # saved states without it stay equal
    alloc = Allocation(workers={"a": ("v100", 3)}, extra={"a": (("t4", 1),)})
    assert allocation_from_dict(json.loads(json.dumps(allocation_to_dict(alloc)))) == alloc
    assert "extra" not in allocation_to_dict(Allocation(workers={"a": ("v100", 3)}))


# ----------------------------------------------------------------------------- placement

NODES = (
    Node("v0", "v100", 2),
    Node("v1", "v100", 2),
    Node("t0", "t4", 2, "inference"),
    Node("t1", "t4", 2, "inference"),
)


def snap(lent: frozenset[str] = frozenset({"t0", "t1"})) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, NODES, (), MODEL, lent_nodes=lent)


def test_each_part_goes_on_its_own_type_all_or_nothing() -> None:
    want = {"j": Assignment("v100", 3, extra=(("t4", 1),))}
    out = ConsolidatingPlacer().place(want, snap(), {})
    kinds = {n.id: n.gpu_type for n in NODES}
    got: dict[str, int] = {}
    for n, g in out["j"].nodes:
        got[kinds[n]] = got.get(kinds[n], 0) + g
    assert got == {"v100": 2, "t4": 1} and out["j"].extra == (("t4", 1),)
    too_big = {"j": Assignment("v100", 7, extra=(("t4", 5),))}  # only 4 T4s
    assert ConsolidatingPlacer().place(too_big, snap(), {}) == {}


def test_flexible_workers_leave_and_the_base_stays() -> None:
    prev = {"j": Assignment("v100", 3, (("t0", 1), ("v0", 2)), extra=(("t4", 1),))}
    same = ConsolidatingPlacer().place({"j": prev["j"]}, snap(), prev)
    assert same["j"] == prev["j"]
    shrunk = ConsolidatingPlacer().place({"j": Assignment("v100", 2)}, snap(), prev)
    assert shrunk["j"] == Assignment("v100", 2, (("v0", 2),))
    # Same worker count, other split: re-placed, the V100 nodes kept.
    other = ConsolidatingPlacer().place(
        {"j": Assignment("v100", 3, extra=(("t4", 2),))}, snap(), prev
    )
    assert other["j"].extra == (("t4", 2),)
    assert ("v0", 1) in other["j"].nodes and ("t0", 2) in other["j"].nodes


def test_a_reclaimed_server_drops_only_its_part() -> None:
    prev = {"j": Assignment("v100", 3, (("t0", 1), ("v0", 2)), extra=(("t4", 1),))}
    out = ConsolidatingPlacer().place({"j": Assignment("v100", 2)}, snap(frozenset({"t1"})), prev)
    assert out["j"].nodes == (("v0", 2),)


# ----------------------------------------------------------------------------- diff, sim


def _job(current: Assignment) -> JobState:
    j = JobState("j", spec(), 0.0, status=m.JobStatus.RUNNING, current=current)
    j.first_start_s = 0.0
    return j


def test_losing_flexible_workers_on_another_type_is_a_scale_in() -> None:
    prev = Assignment("v100", 2, (("t0", 1), ("v0", 1)), extra=(("t4", 1),))
    jobs = {"j": _job(prev)}
    after = Assignment("v100", 1, (("v0", 1),))
    stops, starts = job_actions(jobs, {"j": after}, {"j": prev}, {"t0"}, 5.0)
    assert stops == [m.Resize("j", after)] and starts == []
    assert (jobs["j"].num_resizes, jobs["j"].num_preemptions) == (1, 0)
    # A job that keeps its flexible V100 worker when its T4 base's server goes back: a
    # scale-in too (it still runs on V100).
    base_t4 = Assignment("t4", 2, (("t0", 1), ("v0", 1)), extra=(("v100", 1),))
    jobs = {"j": _job(base_t4)}
    job_actions(jobs, {"j": after}, {"j": base_t4}, {"t0"}, 5.0)
    assert (jobs["j"].num_resizes, jobs["j"].num_preemptions) == (1, 0)


def test_leaving_every_type_is_a_preemption_and_a_launch() -> None:
    prev = Assignment("t4", 1, (("t0", 1),))
    jobs = {"j": _job(prev)}
    after = Assignment("v100", 1, (("v0", 1),))
    stops, starts = job_actions(jobs, {"j": after}, {"j": prev}, {"t0"}, 5.0)
    assert stops == [m.Preempt("j")] and starts == [m.Launch("j", after)]
    assert (jobs["j"].num_resizes, jobs["j"].num_preemptions) == (0, 1)
    assert jobs["j"].current == after and jobs["j"].first_start_s == 0.0


def test_the_simulator_runs_a_mixed_job_at_the_mixed_rate() -> None:
    s = spec("imagenet")
    rt = SimRuntime(MODEL)
    rt.register("j", s)
    rt.apply([m.Launch("j", Assignment("v100", 2, (("t0", 1), ("v0", 1)), extra=(("t4", 1),)))])
    rt.advance(100.0)
    rate = mixed_throughput(MODEL, s, [("v100", 1), ("t4", 1)])
    assert rt.steps["j"] == pytest.approx(100.0 * rate)


# ----------------------------------------------------------------------------- live selectors


def test_each_worker_of_a_mixed_run_is_pinned_to_its_own_nodes_type() -> None:
    from lyra_ray.runtime.runs import worker_selectors

    nodes = (("t0", 1), ("v0", 2))
    sel = worker_selectors("V100", nodes, 3, node_labels={"v0": "V100", "t0": "T4"})
    assert sel == (
        {"gpu-type": "T4", "ray.io/node-id": "t0"},
        {"gpu-type": "V100", "ray.io/node-id": "v0"},
        {"gpu-type": "V100", "ray.io/node-id": "v0"},
    )
    # Without the map (one type): as before, every worker carries the job's type.
    assert worker_selectors("V100", (("v0", 1),), 2) == (
        {"gpu-type": "V100", "ray.io/node-id": "v0"},
        {"gpu-type": "V100"},
    )
