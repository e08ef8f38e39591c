"""Lyra's phase 3 and reclaim: flexible workers on loaned servers of another GPU type."""

from __future__ import annotations

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.placement.reclaim import JobFootprint, plan_reclaim
from lyra_ray.policies.lyra.loaning import DemandMemory
from lyra_ray.policies.lyra.two_phase import LyraPolicy
from lyra_ray.scheduling.core import SchedulerCore

MODEL = SpecThroughputs()
TPUT = {"v100": 1.0, "t4": 0.4}


def spec(name: str, curve: str, steps: float = 36_000.0, lo: int = 1, hi: int = 2) -> JobSpec:
    return JobSpec(
        name=name,
        total_steps=steps,
        min_workers=lo,
        max_workers=hi,
        throughput=TPUT,
        scaling=curve,
    )


def running(name: str, s: JobSpec, a: Assignment) -> JobView:
    return JobView(name, s, 0.0, JobStatus.RUNNING, 0.0, 0.0, {}, {}, a)


def snapshot(jobs: tuple[JobView, ...]) -> ClusterSnapshot:
    nodes = (Node("v0", "v100", 2), Node("t0", "t4", 2, "inference"))
    return ClusterSnapshot(0.0, nodes, jobs, MODEL, serving_demand=0, lent_nodes=frozenset({"t0"}))


def test_idle_loaned_gpus_become_flexible_workers_only_where_they_pay() -> None:
    # The V100s are full; two T4s are lent and idle. imagenet scales well over two
    # servers (one V100 + one T4 = 1.19x the V100 alone), bert does not (0.70x).
    a = running("a", spec("a", "imagenet"), Assignment("v100", 1, (("v0", 1),)))
    b = running("b", spec("b", "bert"), Assignment("v100", 1, (("v0", 1),)))
    alloc = LyraPolicy(reserve_fraction=0.0).allocate(snapshot((a, b)))
    assert alloc.lend == frozenset({"t0"})
    assert alloc.extra == {"a": (("t4", 1),)}
    assert alloc.workers == {"a": ("v100", 2), "b": ("v100", 1)}
    assert "t0" in alloc.preferred_nodes["a"]
    # The same job nearly done gains less than a restart costs: nothing is added.
    short = running("a", spec("a", "imagenet", steps=100.0), Assignment("v100", 1, (("v0", 1),)))
    # (a restart priced at 60 s: the default is the measured restart model's, which moves)
    costly = LyraPolicy(reserve_fraction=0.0, resize_cost_s=60.0)
    assert costly.allocate(snapshot((short, b))).extra == {}


def test_flexible_workers_stay_while_they_still_pay() -> None:
    held = Assignment("v100", 2, (("t0", 1), ("v0", 1)), extra=(("t4", 1),))
    a = running("a", spec("a", "imagenet"), held)
    b = running("b", spec("b", "bert"), Assignment("v100", 1, (("v0", 1),)))
    alloc = LyraPolicy(reserve_fraction=0.0).allocate(snapshot((a, b)))
    assert alloc.extra == {"a": (("t4", 1),)}
    one_type = LyraPolicy(reserve_fraction=0.0, mixed_types=False)
    assert one_type.allocate(snapshot((a, b))).extra == {}


def test_reclaim_prefers_a_scale_in_to_any_preemption() -> None:
    # L1 holds one whole job (value 1, reclaiming it preempts x); L2 holds slices of
    # three jobs that each keep their minimum elsewhere (value 1.5, only scale-ins).
    jobs = [
        JobFootprint("x", {"L1": 1}, 1),
        JobFootprint("p", {"L2": 1, "T0": 1}, 1),
        JobFootprint("q", {"L2": 1, "T1": 1}, 1),
        JobFootprint("r", {"L2": 1, "T2": 1}, 1),
    ]
    plan = plan_reclaim(("L1", "L2"), jobs, 1)
    assert plan.order == ("L2",) and plan.preempted == frozenset()
    assert plan.steps[0].values_before == {"L1": 1.0, "L2": 1.5}


def test_a_reclaim_shrinks_a_mixed_job_and_spares_the_rigid_one() -> None:
    """Through the core: one V100, two lent one-GPU T4 servers. An elastic imagenet job
    runs on the V100 with a flexible worker on a T4; a rigid job runs on the other T4.
    When serving needs a server back, Lyra takes the flexible worker's: a scale-in."""
    core = SchedulerCore(LyraPolicy(reserve_fraction=0.0), MODEL)
    nodes = [Node("v0", "v100", 1), Node("t0", "t4", 1, "inference")]
    nodes.append(Node("t1", "t4", 1, "inference"))
    core.step(0.0, [*(m.NodeUp(n) for n in nodes), m.ServingDemand(0)])
    core.step(1.0, [m.JobSubmitted("e", spec("e", "imagenet"))])
    rigid = JobSpec(name="r", total_steps=3_600.0, throughput=TPUT)  # 1 h: may use a loan
    core.step(2.0, [m.JobSubmitted("r", rigid)])
    e, r = core.jobs["e"].current, core.jobs["r"].current
    assert e is not None and r is not None
    assert e.parts == (("v100", 1), ("t4", 1)) and r.gpu_type == "t4"
    flex_server = next(n for n, _ in e.nodes if n != "v0")
    actions = core.step(3.0, [m.ServingDemand(1)]).actions
    assert m.Reclaim(flex_server) in actions
    assert not any(isinstance(a, m.Preempt) for a in actions)
    assert core.jobs["e"].current == Assignment("v100", 1, (("v0", 1),))
    assert core.jobs["r"].current == r
    assert (core.jobs["e"].num_preemptions, core.jobs["r"].num_preemptions) == (0, 0)


def test_demand_memory_lends_only_after_a_drop_has_lasted() -> None:
    mem = DemandMemory(1800.0)
    assert mem.held(0.0, 5) == 5
    assert mem.held(900.0, 3) == 5  # a drop: the window still holds the 5
    assert mem.held(1799.0, 3) == 5
    assert mem.held(2700.0, 3) == 3  # it has lasted a whole window
    assert mem.held(3000.0, 6) == 6  # a rise counts at once
