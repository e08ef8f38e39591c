"""The metrics' values from the core's state (lyra_ray.telemetry), without a cluster."""

from __future__ import annotations

import pytest

from lyra_ray import model as m
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.telemetry.catalogue import METRICS, MetricDef, metric
from lyra_ray.telemetry.values import (
    StepRates,
    action_counts,
    allocated_share,
    fair_share_ratio,
    state_samples,
)
from tests.builders import job


def _values(samples: list, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.labels: s.value for s in samples if s.name == name}


def _loaning_core() -> SchedulerCore:
    """A training server running a rigid job, two inference servers: one lent (an elastic
    job on one of its two GPUs), one serving; one job queued."""
    core = SchedulerCore(get_policy("lyra", reserve_fraction=0.0), SpecThroughputs())
    nodes = [
        m.Node("train", "t4", 2, "training"),
        m.Node("inf-a", "t4", 2, "inference"),
        m.Node("inf-b", "t4", 2, "inference"),
    ]
    events: list[m.Event] = [m.NodeUp(n) for n in nodes] + [m.ServingDemand(1)]
    events.append(m.JobSubmitted("rigid", job("rigid", 1000, workers=2, tput={"t4": 1.0})))
    core.step(0.0, events)
    one = job("elastic", 1000, workers=1, max_workers=1, tput={"t4": 1.0})
    core.step(1.0, [m.JobSubmitted("elastic", one)])
    big = job("waiting", 1000, workers=2, arrival=2.0, tput={"t4": 1.0})
    core.step(2.0, [m.JobSubmitted("waiting", big)])
    core.fold(12.0, [])
    return core


def test_gpu_uses_partition_each_pool() -> None:
    core = _loaning_core()
    assert len(core.lent) == 1
    (lent,) = core.lent
    assert core.jobs["elastic"].current is not None
    assert {n for n, _ in core.jobs["elastic"].current.nodes} == {lent}
    gpus = {
        dict(k)["pool"] + "/" + dict(k)["use"]: v
        for k, v in _values(state_samples(core), "lyra_gpus").items()
    }
    assert gpus == {
        "training/training": 2.0,  # the rigid job
        "training/idle": 0.0,
        "inference/serving": 2.0,  # the server not lent
        "inference/lent": 1.0,  # the elastic job on the lent server
        "inference/idle": 1.0,
    }


def test_queue_jobs_servers_and_demand() -> None:
    core = _loaning_core()
    s = state_samples(core, server_states={"inf-b": "reclaiming"})
    assert _values(s, "lyra_queue_length") == {(): 1.0}
    assert _values(s, "lyra_queue_oldest_age_seconds") == {(): 10.0}  # arrived at 2, now 12
    jobs = {dict(k)["state"]: v for k, v in _values(s, "lyra_jobs").items()}
    assert jobs["running"] == 2 and jobs["queued"] == 1 and jobs["finished"] == 0
    assert set(jobs) == {st.value for st in m.JobStatus}
    servers = {dict(k)["state"]: v for k, v in _values(s, "lyra_inference_servers").items()}
    # the live pool's view wins where given; the core's lent set decides the rest
    lent = "lent" if "inf-a" in core.lent else "serving"
    assert servers["reclaiming"] == 1 and servers[lent] == 1 and sum(servers.values()) == 2
    assert _values(s, "lyra_serving_demand_servers") == {(): 1.0}


def test_per_job_gauges_only_for_running_jobs() -> None:
    core = _loaning_core()
    s = state_samples(core, steps_per_s={"rigid": 2.5})
    progress = _values(s, "lyra_job_progress_ratio")
    assert {dict(k)["job_id"] for k in progress} == {"rigid", "elastic"}
    assert _values(s, "lyra_job_steps_per_second") == {
        (("job_id", "rigid"), ("name", "rigid")): 2.5
    }
    fair = _values(s, "lyra_job_fair_share_ratio")
    # lyra sizes jobs in whole workers (share 1); rigid ran 12 of its 12 s
    assert fair[(("job_id", "rigid"), ("name", "rigid"))] == pytest.approx(1.0)


def test_fair_share_is_received_over_allocated() -> None:
    alloc = m.Allocation(fractions={"a": {"v100": 0.25, "k80": 0.25}, "a+b": {"v100": 0.5}})
    shares = allocated_share(alloc)
    assert shares == {"a": 1.0, "b": 0.5}
    assert fair_share_ratio(received_s=30.0, elapsed_s=100.0, share=0.5) == pytest.approx(0.6)
    assert fair_share_ratio(10.0, 0.0, 0.5) is None and fair_share_ratio(10.0, 5.0, 0.0) is None


def test_action_counts_cover_every_counter() -> None:
    a = m.Assignment("t4", 1)
    acts = [m.Launch("x", a), m.Preempt("y"), m.Preempt("z"), m.Lend("n"), m.Resize("x", a)]
    assert action_counts(acts) == {
        "lyra_launches_total": 1,
        "lyra_preemptions_total": 2,
        "lyra_resizes_total": 1,
        "lyra_lends_total": 1,
        "lyra_reclaims_total": 0,
    }
    for name in action_counts([]):
        assert metric(name).kind == "counter"


def test_step_rates_use_a_window_and_restart_after_a_restore() -> None:
    r = StepRates(window_s=60.0)
    assert r.update(0.0, [("a", 0.0)]) == {}
    assert r.update(10.0, [("a", 20.0)]) == {"a": 2.0}
    assert r.update(100.0, [("a", 200.0)])["a"] == pytest.approx(2.0)
    assert r.update(200.0, [("a", 400.0)])["a"] == pytest.approx(2.0)  # window slid
    assert r.update(210.0, [("a", 100.0)]) == {}  # restored from an older checkpoint
    assert r.update(220.0, []) == {} and r.update(230.0, [("a", 5.0)]) == {}  # forgotten
    with pytest.raises(ValueError, match="'window_s'"):
        StepRates(window_s=float("nan"))


def test_catalogue_follows_prometheus_conventions() -> None:
    names = [d.name for d in METRICS]
    assert len(names) == len(set(names))
    for d in METRICS:
        assert d.scraped == "ray_" + d.name
        assert d.ray_name + ("_total" if d.kind == "counter" else "") == d.name
        assert d.help.endswith(".") and d.help[0].isupper(), d.name
    assert metric("lyra_preemptions_total").ray_name == "lyra_preemptions"
    with pytest.raises(KeyError, match="no lyra metric 'lyra_nope'"):
        metric("lyra_nope")
    bad = [
        ("queue_length", "gauge", ()),  # no prefix
        ("lyra_things", "counter", ()),  # a counter without _total
        ("lyra_x_total", "gauge", ()),  # _total on a gauge
        ("lyra_x_seconds", "histogram", ()),  # a histogram without buckets
    ]
    for name, kind, buckets in bad:
        with pytest.raises(ValueError, match="field"):
            MetricDef(name, kind, "Help.", buckets=buckets)  # type: ignore[arg-type]
