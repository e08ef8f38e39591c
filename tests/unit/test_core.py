"""The core on the simulator: invariants under random arrivals and cluster shapes."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray import model as m
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.core import Folded, SchedulerCore
from lyra_ray.sim.simulator import Simulator
from tests.builders import check_invariants, job

GPU = ["v100", "p100", "k80"]


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[m.Node], list[m.JobSpec]]:
    nodes = []
    for g in draw(st.lists(st.sampled_from(GPU), min_size=1, max_size=3, unique=True)):
        for i in range(draw(st.integers(1, 3))):
            nodes.append(m.Node(f"{g}-{i}", g, draw(st.integers(1, 4))))
    cap = {g: sum(n.num_gpus for n in nodes if n.gpu_type == g) for g in GPU}
    specs = []
    for i in range(draw(st.integers(1, 12))):
        g = draw(st.sampled_from([g for g in GPU if cap[g]]))
        w = draw(st.integers(1, cap[g]))
        tput = {t: draw(st.floats(0.5, 4)) for t in GPU if cap[t] >= w} | {g: 1.0}
        specs.append(
            job(
                f"j{i}",
                steps=draw(st.floats(1, 500)),
                workers=w,
                arrival=draw(st.floats(0, 300)),
                tput=tput,
            )
        )
    return nodes, specs


def _checked(core: SchedulerCore) -> None:
    orig = core.decide

    def decide(folded: Folded) -> m.Decision:
        out = orig(folded)
        check_invariants(core)
        return out

    core.decide = decide  # type: ignore[method-assign]


@settings(max_examples=60, deadline=None)
@given(workloads())
def test_fifo_invariants_and_all_jobs_finish(w: tuple[list[m.Node], list[m.JobSpec]]) -> None:
    nodes, specs = w
    sim = Simulator(nodes, get_policy("fifo_nonpreemptive"), SpecThroughputs(), round_s=60)
    _checked(sim.core)
    res = sim.run(specs)
    assert res.summary["completed_jobs"] == len(specs)
    for rec, spec in zip(res.jobs, specs, strict=True):
        best = max(spec.throughput[g] * spec.min_workers for g in spec.throughput)  # type: ignore[index]
        assert rec["steps_done"] == spec.total_steps
        assert rec["jct_s"] >= spec.total_steps / best - 1e-6  # JCT >= run time
        assert rec["queue_s"] >= 0


def test_state_round_trip_resumes_identically() -> None:
    nodes = [m.Node("v-0", "v100", 2), m.Node("k-0", "k80", 2)]
    specs = [
        job("a", 100, 2, tput={"v100": 1, "k80": 0.5}),
        job("b", 50, 2, arrival=5, tput={"v100": 1, "k80": 0.5}),
        job("c", 80, 2, arrival=6, tput={"k80": 1}),
    ]
    policy = get_policy("fifo_nonpreemptive")
    core = SchedulerCore(policy, SpecThroughputs())
    core.step(0.0, [m.NodeUp(n) for n in nodes] + [m.JobSubmitted("a", specs[0])])
    core.step(5.0, [m.JobSubmitted("b", specs[1]), m.JobProgress("a", 5.0)])
    state = json.loads(json.dumps(core.to_state()))
    twin = SchedulerCore(policy, SpecThroughputs())
    twin.load_state(state)
    assert twin.to_state() == core.to_state()
    ev = [m.JobSubmitted("c", specs[2])]
    assert twin.step(6.0, ev) == core.step(6.0, ev)


def test_cancel_releases_and_time_cannot_go_back() -> None:
    core = SchedulerCore(get_policy("fifo_nonpreemptive"), SpecThroughputs())
    acts = core.step(0.0, [m.NodeUp(m.Node("v", "v100", 1)), m.JobSubmitted("a", job("a"))]).actions
    assert [type(a) for a in acts] == [m.Launch]
    acts = core.step(1.0, [m.JobCancelled("a")]).actions
    assert acts == (m.Finish("a"),) and core.jobs["a"].status is m.JobStatus.CANCELLED
    try:
        core.step(0.5, [])
    except ValueError as e:
        assert "backwards" in str(e)
    else:
        raise AssertionError("expected ValueError")


def test_node_down_requeues_its_jobs_elsewhere() -> None:
    core = SchedulerCore(get_policy("fifo_nonpreemptive"), SpecThroughputs())
    core.step(
        0.0,
        [
            m.NodeUp(m.Node("a", "v100", 1)),
            m.NodeUp(m.Node("b", "v100", 1)),
            m.JobSubmitted("j", job("j")),
        ],
    )
    first = core.jobs["j"].current
    assert first is not None
    acts = core.step(1.0, [m.NodeDown(first.nodes[0][0])]).actions
    assert len(acts) == 1 and isinstance(acts[0], m.Launch)
    assert acts[0].assignment.nodes[0][0] != first.nodes[0][0]


def test_batched_progress_folds_like_one_report_per_job() -> None:
    """``JobsProgress`` (the simulator's batch) must leave every job exactly as the same
    reports sent one ``JobProgress`` at a time would: monotone, capped at total steps,
    and the minimum lease starts at the first step past launch."""
    nodes = [m.Node("v", "v100", 2)]
    specs = [job("a", 100, 1, tput={"v100": 1}), job("b", 50, 1, tput={"v100": 1})]
    reports = [{"a": 10.0, "b": 60.0}, {"a": 5.0, "b": 20.0}, {"a": 30.0}]
    cores = []
    for batched in (True, False):
        core = SchedulerCore(get_policy("fifo_nonpreemptive"), SpecThroughputs())
        core.step(0.0, [m.NodeUp(n) for n in nodes] + [m.JobSubmitted(s.name, s) for s in specs])
        for t, rep in enumerate(reports, start=1):
            if batched:
                events: list[m.Event] = [m.JobsProgress(rep)]
            else:
                events = [m.JobProgress(jid, steps) for jid, steps in rep.items()]
            core.step(float(t), events)
        cores.append(core)
    batched_core, single_core = cores
    assert batched_core.to_state() == single_core.to_state()
    a, b = batched_core.jobs["a"], batched_core.jobs["b"]
    assert (a.steps_done, b.steps_done) == (30.0, 50.0)  # monotone; b capped at its total
    assert a.lease_from_s == 1.0 and b.lease_from_s == 1.0
