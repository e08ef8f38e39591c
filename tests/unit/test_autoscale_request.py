"""What lyra asks the autoscaler for (lyra_ray/autoscale): a pure function of the snapshot.

Each case builds a snapshot by hand (nodes, running and waiting jobs) and checks the
request's level per node type, the cap that bound it, and the jobs left unserved.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from lyra_ray.autoscale.request import node_counts, scale_request
from lyra_ray.autoscale.settings import AutoscaleSettings, parse_autoscale
from lyra_ray.autoscale.spend import Spend, accrue
from lyra_ray.model import (
    Assignment,
    ClusterSnapshot,
    JobSpec,
    JobStatus,
    JobView,
    Node,
    ThroughputModel,
)
from lyra_ray.model.errors import InputError

TYPES: dict[str, Any] = {
    "head": {"resources": {"CPU": 0}},
    "a100": {
        "resources": {"GPU": 1, "accelerator_type:A100": 1, "CPU": 2},
        "labels": {"gpu-type": "a100", "pool": "training"},
        "min_workers": 0,
        "max_workers": 2,
    },
    "k80": {
        "resources": {"GPU": 2, "accelerator_type:K80": 1},
        "labels": {"gpu-type": "k80", "pool": "training"},
        "min_workers": 0,
        "max_workers": 3,
    },
    "t4-inference": {
        "resources": {"GPU": 1, "accelerator_type:T4": 1},
        "labels": {"gpu-type": "t4", "pool": "inference"},
        "max_workers": 2,
    },
}
PRICES = {"a100": 10.0, "k80": 2.0, "t4-inference": 1.0}


def settings(**kw: Any) -> AutoscaleSettings:
    raw = {
        "enabled": True,
        "prices": PRICES,
        "cluster": {"available_node_types": TYPES, "head_node_type": "head", "max_workers": 10},
        **kw,
    }
    return parse_autoscale(raw)


def view(
    jid: str,
    workers: int = 1,
    tput: dict[str, float] | None = None,
    arrival: float = 0.0,
    on: tuple[str, tuple[tuple[str, int], ...]] | None = None,
) -> JobView:
    spec = JobSpec(
        name=jid,
        total_steps=100,
        min_workers=workers,
        max_workers=workers,
        throughput=tput or {"a100": 1.0},
    )
    current = None if on is None else Assignment(on[0], workers, on[1])
    return JobView(
        id=jid,
        spec=spec,
        arrival_s=arrival,
        status=JobStatus.RUNNING if current else JobStatus.QUEUED,
        steps_done=0.0,
        attained_service_s=0.0,
        time_received_s={},
        throughput={},
        current=current,
    )


def snap(nodes: list[Node], jobs: list[JobView], **kw: Any) -> ClusterSnapshot:
    return ClusterSnapshot(
        now=100.0, nodes=tuple(nodes), jobs=tuple(jobs), throughput_model=ThroughputModel(), **kw
    )


def line(req: Any, name: str) -> Any:
    return next(r for r in req.types if r.node_type == name)


def test_a_burst_asks_for_nodes_up_to_max_workers_and_names_the_bound() -> None:
    jobs = [view(f"j{i}", arrival=i) for i in range(3)]
    req = scale_request(snap([], jobs), settings(), Spend())
    a = line(req, "a100")
    assert (a.nodes, a.wanted, a.jobs) == (2, 3, ("j0", "j1"))
    assert a.bound is not None and "max_workers" in a.bound
    assert set(req.unserved) == {"j2"} and "max_workers" in req.unserved["j2"]
    bundles = req.bundles(settings().node_types)
    assert bundles == [{"CPU": 2.0, "GPU": 1.0, "accelerator_type:A100": 1.0}] * 2
    assert req.selectors(settings().node_types) == [{"gpu-type": "a100", "pool": "training"}] * 2


def test_free_gpus_are_used_before_a_node_is_bought_and_idle_nodes_are_let_go() -> None:
    nodes = [Node("k0", "k80", 2), Node("k1", "k80", 2)]
    running = view("r", tput={"k80": 1.0}, on=("k80", (("k0", 1),)))
    waiting = view("w", tput={"k80": 1.0, "a100": 5.0})  # a100 is better per dollar here
    req = scale_request(snap(nodes, [running, waiting]), settings(), Spend())
    k = line(req, "k80")
    assert (k.have, k.busy, k.nodes, k.jobs) == (2, 1, 1, ("w",))  # k1 is idle: not asked
    assert line(req, "a100").nodes == 0
    idle = scale_request(snap(nodes, []), settings(), Spend())
    assert idle.level() == {"a100": 0, "k80": 0, "t4-inference": 0}


def test_the_type_with_most_steps_per_dollar_is_asked_for_and_a_full_one_spills() -> None:
    # k80: 1 step/s per GPU at $1/GPU-h; a100: 4 step/s at $10/GPU-h -> k80 wins
    cheap = view("c", tput={"k80": 1.0, "a100": 4.0})
    assert line(scale_request(snap([], [cheap]), settings(), Spend()), "k80").nodes == 1
    fast = view("f", tput={"k80": 1.0, "a100": 20.0})
    assert line(scale_request(snap([], [fast]), settings(), Spend()), "a100").nodes == 1
    # a100 at its max (2 busy nodes): the next job goes to k80 instead
    nodes = [Node("a0", "a100", 1), Node("a1", "a100", 1)]
    busy = [view(f"b{i}", on=("a100", ((f"a{i}", 1),))) for i in range(2)]
    req = scale_request(snap(nodes, [*busy, fast]), settings(), Spend())
    assert (line(req, "a100").nodes, line(req, "k80").nodes) == (2, 1)
    assert "max_workers" in str(line(req, "a100").bound) and not req.unserved


def test_a_job_spanning_nodes_asks_for_enough_of_them() -> None:
    req = scale_request(snap([], [view("big", workers=5, tput={"k80": 1.0})]), settings(), Spend())
    assert line(req, "k80").nodes == 3  # 5 GPUs on 2-GPU nodes
    too_big = view("huge", workers=7, tput={"k80": 1.0})  # more than 3 x 2 GPUs
    assert scale_request(snap([], [too_big]), settings(), Spend()).level()["k80"] == 0


def test_inference_nodes_that_serve_or_are_lent_are_kept_and_demand_adds_servers() -> None:
    nodes = [Node("s", "t4", 1, "inference"), Node("l", "t4", 1, "inference")]
    nodes.append(Node("idle", "t4", 1, "inference"))
    kept = scale_request(
        snap(nodes, [], lent_nodes=frozenset({"l"})), settings(), Spend(), serving=frozenset({"s"})
    )
    assert line(kept, "t4-inference").nodes == 2  # 'idle' neither serves nor is lent
    more = scale_request(
        snap(nodes[:1], [], serving_demand=2), settings(), Spend(), frozenset({"s"})
    )
    assert line(more, "t4-inference").nodes == 2


def test_the_budgets_stop_new_nodes_but_never_drop_busy_ones() -> None:
    nodes = [Node("a0", "a100", 1)]
    jobs = [view("r", on=("a100", (("a0", 1),))), view("w")]
    spent = Spend({"a100": 3600.0 * 19.5})  # 19.5 node-hours of a $10 node: $195
    req = scale_request(snap(nodes, jobs), settings(budget_usd=200.0), spent)
    a = line(req, "a100")
    assert (a.nodes, a.wanted) == (1, 2) and "budget_usd" in str(a.bound)
    assert "budget_usd" in req.unserved["w"]
    ok = scale_request(snap(nodes, jobs), settings(budget_usd=210.0), spent)
    assert line(ok, "a100").nodes == 2  # $15 left covers an hour of a $10 node
    hours = scale_request(snap(nodes, jobs), settings(budget_node_hours=20.0), spent)
    assert "budget_node_hours" in str(line(hours, "a100").bound)
    short = settings(budget_node_hours=20.0, commit_hours=0.25)
    assert line(scale_request(snap(nodes, jobs), short, spent), "a100").nodes == 2


def test_the_spend_rate_and_the_clusters_max_workers_cap_the_level() -> None:
    jobs = [view("a"), view("b")]
    rate = scale_request(snap([], jobs), settings(max_usd_per_hour=15.0), Spend())
    assert line(rate, "a100").nodes == 1 and "max_usd_per_hour" in str(line(rate, "a100").bound)
    small = parse_autoscale(
        {
            "enabled": True,
            "cluster": {"available_node_types": TYPES, "head_node_type": "head", "max_workers": 1},
        }
    )
    assert scale_request(snap([], jobs), small, Spend()).level()["a100"] == 1


def test_off_or_untyped_jobs_ask_for_nothing_and_the_answer_is_deterministic() -> None:
    jobs = [view("x", tput={"h200": 1.0}), view("y", arrival=3), view("z", arrival=1)]
    s = snap([Node("gone", "h200", 8)], jobs)
    req = scale_request(s, settings(), Spend())
    assert "x" not in req.unserved and line(req, "a100").jobs == ("z", "y")
    assert req == scale_request(s, settings(), Spend())
    assert scale_request(s, settings(enabled=False), Spend()).types == ()


def test_spend_counts_nodes_above_min_workers_only() -> None:
    s = settings()
    spend = accrue(Spend(), {"a100": 2, "k80": 0}, s.node_types, 1800.0)
    assert spend.node_seconds == {"a100": 3600.0}
    assert spend.usd(s.node_types) == pytest.approx(10.0)
    assert accrue(spend, {"a100": 5}, s.node_types, math.nan) == spend
    assert Spend.from_dict(spend.to_dict()) == spend
    assert Spend.from_dict({"node_seconds": {"a": "x", "b": -1, "c": 5}}).node_seconds == {"c": 5.0}
    assert Spend.from_dict(None) == Spend()
    assert node_counts([Node("a", "a100", 1), Node("o", "h200", 8)], s.node_types) == {"a100": 1}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"enabled": "yes"}, "autoscale.enabled"),
        ({"budget_usd": math.inf}, "autoscale.budget_usd"),
        ({"budget_usd": float("nan")}, "autoscale.budget_usd"),
        ({"budget_node_hours": True}, "autoscale.budget_node_hours"),
        ({"max_usd_per_hour": 10**400}, "autoscale.max_usd_per_hour"),
        ({"commit_hours": -1}, "autoscale.commit_hours"),
        ({"bogus": 1}, "unknown"),
        ({"prices": {"nope": 1.0}}, "autoscale.prices"),
        ({"prices": {"a100": 0}}, "autoscale.prices.a100"),
        ({"prices": {"a100": 1e9}}, "autoscale.prices.a100"),
        ({"cluster": None, "prices": {}}, "autoscale.enabled"),
        ({"cluster": []}, "autoscale.cluster"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    raw = {
        "enabled": True,
        "cluster": {"available_node_types": TYPES, "head_node_type": "head"},
        **change,
    }
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        parse_autoscale(raw)


@pytest.mark.parametrize(
    ("name", "spec", "field"),
    [
        ("x", {"resources": {"GPU": 1}}, "labels.gpu-type"),
        ("x", {"resources": {"GPU": 1.5, "accelerator_type:A": 1}}, "resources.GPU"),
        ("x", {"resources": {"GPU": -1}}, "resources.GPU"),
        ("x", {"resources": {"GPU": 1}, "labels": {"gpu-type": "a", "pool": "p"}}, "labels.pool"),
        ("x", {"resources": {"GPU": 1}, "labels": {"gpu-type": 3}}, "labels"),
        (
            "x",
            {
                "resources": {"GPU": 1},
                "labels": {"gpu-type": "a100"},
                "min_workers": 3,
                "max_workers": 1,
            },
            "min_workers",
        ),
        (
            "x",
            {"resources": {"GPU": 1}, "labels": {"gpu-type": "a100"}, "max_workers": 10**6},
            "max_workers",
        ),
        ("x", {"resources": {"GPU": 1}, "labels": {"gpu-type": "h999"}}, "no list price"),
        (
            "x",
            {"resources": {"GPU": 1, "accelerator_type:A100": 1}, "labels": {"gpu-type": "a100"}},
            "same GPU type",
        ),
    ],
)
def test_bad_node_types_are_refused_naming_the_field(name: str, spec: Any, field: str) -> None:
    types = {**TYPES, name: spec}
    raw = {"enabled": True, "cluster": {"available_node_types": types, "head_node_type": "head"}}
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        parse_autoscale(raw)


def test_possible_gpus_are_the_training_types_at_their_max() -> None:
    assert settings().possible_gpus() == {"a100": 2, "k80": 6}
