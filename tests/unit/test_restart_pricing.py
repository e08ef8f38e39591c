"""One restart model, charged where Lyra resizes or preempts (docs/lyra.md, "The price
of a resize"): each job's price from its checkpoint and start-up, its own live restarts
fed back, phase 2, phase 3 and the reclaim weighing it, and the simulator charging it."""

from __future__ import annotations

import dataclasses

import pytest

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.restart_cost import (
    MEASURED,
    RESTART_S,
    RESTORE_S_PER_GB,
    SAVE_S_PER_GB,
    RestartModel,
)
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.placement.reclaim import JobFootprint, plan_reclaim
from lyra_ray.policies.lyra.two_phase import LyraPolicy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.sim.simulator import Simulator

BIG_MB = 20_000.0


def spec(name: str, steps: float = 200.0, ckpt: float | None = None, **kw: object) -> JobSpec:
    base: dict[str, object] = {"min_workers": 1, "max_workers": 4, "throughput": {"v100": 1.0}}
    base.update(kw)
    return JobSpec(name, steps, checkpoint_mb=ckpt, **base)  # type: ignore[arg-type]


def test_a_price_grows_with_the_checkpoint_and_the_start_up() -> None:
    rm = RestartModel()
    plain = rm.price("a", spec("a"))
    assert round(plain, 1) == RESTART_S
    big = rm.price("b", spec("b", ckpt=BIG_MB))
    assert big == pytest.approx(plain + 20 * (SAVE_S_PER_GB + RESTORE_S_PER_GB))
    slow = rm.price("c", dataclasses.replace(spec("c"), startup_s=60.0))
    # the stated start-up replaces the default floor (the H200 warm spare) in the worker term,
    # max(workers_up + first_step, start-up): whichever of the two bound before
    worker = MEASURED.workers_up_s + MEASURED.first_step_s
    default = max(worker, MEASURED.worker_floor_s)
    assert slow == pytest.approx(plain - default + max(worker, 60.0))
    assert slow > plain


def test_a_jobs_own_restarts_replace_the_model_phase_by_phase() -> None:
    rm, s = RestartModel(), spec("a", ckpt=BIG_MB)
    modelled = rm.price("a", s)
    # a preemption measured its stop and its checkpoint only
    rm.observe("a", {"stop_signal_s": 1.0, "checkpoint_s": 2.0, "bogus": 9.0, "relaunch_s": -3})
    after = rm.price("a", s)
    assert after == pytest.approx(
        modelled - MEASURED.stop_signal_s - (MEASURED.checkpoint_s + 20 * SAVE_S_PER_GB) + 3.0
    )
    rm.observe("a", {"workers_up_s": 4.0, "first_step_s": 1.0})  # a resize: the start too
    assert rm.price("a", s) == pytest.approx(1.0 + 2.0 + MEASURED.relaunch_s + 5.0)
    again = RestartModel()
    again.load_state(rm.to_state())
    assert again.price("a", s) == rm.price("a", s)
    rm.forget("a")
    assert rm.price("a", s) == pytest.approx(modelled)


def test_the_live_path_feeds_a_jobs_restarts_to_the_policy() -> None:
    core = SchedulerCore(LyraPolicy(), SpecThroughputs())
    core.step(0.0, [m.NodeUp(Node("n", "v100", 4)), m.JobSubmitted("j", spec("j"))])
    before = core.snapshot().restart_model.price("j", core.jobs["j"].spec)
    core.step(1.0, [m.RestartMeasured("j", {"checkpoint_s": 100.0})])
    after = core.snapshot().restart_model.price("j", core.jobs["j"].spec)
    assert after == pytest.approx(before - MEASURED.checkpoint_s + 100.0)
    fresh = SchedulerCore(LyraPolicy(), SpecThroughputs())
    fresh.load_state(core.to_state())  # a restarted scheduler keeps what it learnt
    assert fresh.snapshot().restart_model.price("j", fresh.jobs["j"].spec) == after


def _running(s: JobSpec, workers: int, remaining: float) -> JobView:
    return JobView(
        id=s.name,
        spec=s,
        arrival_s=0.0,
        status=JobStatus.RUNNING,
        steps_done=s.total_steps - remaining,
        attained_service_s=0.0,
        time_received_s={},
        throughput={"v100": 1.0},
        current=Assignment("v100", workers, (("n", workers),)),
    )


def test_phase_two_grows_a_job_only_for_a_gain_above_its_restart() -> None:
    # 2 of 4 GPUs idle: growing 2 -> 4 takes 200/2 - 200/4 = 50 s off the job.
    for ckpt, size in ((None, 4), (BIG_MB, 2)):
        job = _running(spec("j", ckpt=ckpt), 2, 200.0)
        snap = ClusterSnapshot(0.0, (Node("n", "v100", 4),), (job,), SpecThroughputs())
        assert LyraPolicy().allocate(snap).workers["j"] == ("v100", size), ckpt


def test_phase_three_weighs_a_cross_type_worker_against_the_restart() -> None:
    nodes = (Node("n", "v100", 1), Node("i", "t4", 1, "inference"))
    for ckpt, extra in ((None, (("t4", 1),)), (BIG_MB, ())):
        s = spec("j", ckpt=ckpt, throughput={"v100": 1.0, "t4": 0.9})
        job = _running(s, 1, 200.0)  # a T4 beside takes 200 - 200 / 1.9 = 95 s off
        snap = ClusterSnapshot(0.0, nodes, (job,), SpecThroughputs(), lent_nodes=frozenset({"i"}))
        alloc = LyraPolicy(loan_max_remaining_s=None, move_gain_s=None).allocate(snap)
        assert alloc.extra.get("j", ()) == extra, ckpt


def test_the_reclaim_gives_back_the_server_whose_jobs_restart_cheapest() -> None:
    jobs = [JobFootprint("big", {"A": 2, "T": 2}, 1), JobFootprint("small", {"B": 2, "T": 2}, 1)]
    assert plan_reclaim(["A", "B"], jobs, 1).order == ("A",)  # equal values: by id
    prices = {"big": 160.0, "small": 25.0}
    assert plan_reclaim(["A", "B"], jobs, 1, prices).order == ("B",)


def test_a_job_with_a_large_checkpoint_is_resized_less() -> None:
    """A short rigid job shares 4 GPUs with an elastic one; when it ends, growing into its
    2 GPUs takes ~85 s off the elastic job: worth a 25 s restart, not a 20 GB one."""
    nodes = [Node("n", "v100", 4)]

    def resizes(ckpt: float | None) -> int:
        jobs = [
            JobSpec("short", 60.0, 2, 2, throughput={"v100": 1.0}),
            spec("long", steps=400.0, ckpt=ckpt),
        ]
        sim = Simulator(nodes, LyraPolicy(), SpecThroughputs(), restart_model=RestartModel())
        res = sim.run(jobs)
        return int(next(r["resizes"] for r in res.jobs if r["name"] == "long"))

    assert (resizes(None), resizes(BIG_MB)) == (1, 0)
