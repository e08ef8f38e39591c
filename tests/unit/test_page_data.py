"""The operator page's pure parts: sessions, rates from ingress counters, the data."""

from __future__ import annotations

import pytest

from lyra_ray.page import claims_page_route
from lyra_ray.page.assemble import assemble, loan_events, servers
from lyra_ray.page.rates import ServiceRates
from lyra_ray.page.sessions import SessionBook


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_sessions_expire_when_idle_and_at_their_maximum_age() -> None:
    clock = Clock()
    book = SessionBook(idle_s=60, max_s=300, clock=clock)
    s = book.open("tok", "alice", False)
    clock.t += 59
    assert book.get(s.sid) is s
    clock.t += 61  # idle 61 s
    assert book.get(s.sid) is None
    s = book.open("tok", "alice", False)
    for _ in range(7):  # kept busy, it still ends after 300 s
        clock.t += 50
        got = book.get(s.sid)
    assert got is None and len(book) == 0


def test_logout_and_a_withdrawn_token_end_sessions() -> None:
    book = SessionBook(clock=Clock())
    a1, a2 = book.open("ta", "alice", False), book.open("ta", "alice", False)
    b = book.open("tb", "bob", True)
    assert a1.sid != a2.sid and book.end(a1.sid) and not book.end(a1.sid)
    assert book.end_token("ta") == 1 and book.get(a2.sid) is None
    assert book.get(b.sid) is b and book.get(None) is None and book.get("nope") is None
    with pytest.raises(ValueError):
        SessionBook(idle_s=0)


def test_rates_from_counters_by_littles_law() -> None:
    clock = Clock()
    r = ServiceRates(clock)
    assert r.update("s", None)["rps"] is None
    assert r.update("s", {"completed": 100, "ongoing_avg": 2.0})["rps"] is None
    clock.t += 10
    got = r.update("s", {"completed": 300, "failed": 0, "ongoing_avg": 2.0})
    assert got["rps"] == pytest.approx(20.0) and got["latency_ms"] == pytest.approx(100.0)
    clock.t += 1  # too soon to compare: the last rate stands
    assert r.update("s", {"completed": 301, "ongoing_avg": 2.0})["rps"] == pytest.approx(20.0)
    clock.t += 10  # a restarted ingress counts from zero: no rate from the drop
    assert r.update("s", {"completed": 5, "ongoing_avg": 0.0})["rps"] is None


def test_the_page_route_is_kept_from_services() -> None:
    assert (
        claims_page_route("/lyra") and claims_page_route("/lyra/") and claims_page_route("/lyra/x")
    )
    assert (
        not claims_page_route("/lyrics")
        and not claims_page_route("/")
        and not claims_page_route("/a")
    )


NODES = [
    {"id": "train-node-1", "gpu_type": "v100", "pool": "training", "gpus": 4, "state": "training"},
    {"id": "infer-node-1", "gpu_type": "t4", "pool": "inference", "gpus": 2, "state": "lent"},
    {"id": "infer-node-2", "gpu_type": "t4", "pool": "inference", "gpus": 2, "state": "serving"},
]
JOBS = [
    {
        "id": "j1",
        "name": "big",
        "owner": "alice",
        "status": "running",
        "assignment": {
            "gpu_type": "v100",
            "workers": 3,
            "nodes": [["train-node-1", 3]],
            "partner": "j3",
        },
        "steps_done": 50,
        "total_steps": 200,
        "num_resizes": 1,
        "num_preemptions": 0,
        "ray_job": "raysubmit_1",
    },
    {
        "id": "j2",
        "name": "wide",
        "owner": "bob",
        "status": "queued",
        "reason": "no GPUs",
        "queued_s": 5,
    },
    {
        "id": "j3",
        "name": "lent-user",
        "owner": "bob",
        "status": "running",
        "assignment": {
            "gpu_type": "t4",
            "workers": 1,
            "nodes": [["infer-node-1", 1]],
            "partner": None,
        },
        "steps_done": 0,
        "total_steps": 0,
    },
    {"id": "j4", "name": "old", "owner": "bob", "status": "finished"},
]


def test_servers_slots_say_what_each_gpu_does() -> None:
    out = {s["id"]: s for s in servers(NODES, JOBS, admin=True)}
    assert [x["state"] for x in out["train-node-1"]["slots"]] == ["training"] * 3 + ["idle"]
    assert out["train-node-1"]["state"] == "training"
    assert [x["state"] for x in out["infer-node-1"]["slots"]] == ["lent", "lent"]
    assert out["infer-node-1"]["slots"][0]["job"] == "j3"
    assert [x["state"] for x in out["infer-node-2"]["slots"]] == ["serving"] * 2
    mine = {s["id"]: s for s in servers(NODES, JOBS[:1], admin=False)}
    assert mine["train-node-1"]["slots"][-1]["state"] == "free or others'"


def test_assemble_splits_jobs_links_them_and_keeps_teams_when_present() -> None:
    overview = {
        "nodes": NODES,
        "jobs": JOBS,
        "serving": {
            "services": [
                {
                    "name": "m",
                    "model": "moe",
                    "replicas": 4,
                    "ready": 4,
                    "demand_servers": 1,
                    "plan": {
                        "counts": [[1, 2], [2, 2]],
                        "planned_share": [[0.2, 0.4], [0.25, 0.25]],
                    },
                }
            ],
            "lends": [{"node": "infer-node-1", "at": 900.0}, {"node": "infer-node-1", "at": 10.0}],
            "reclaims": [{"node": "infer-node-2", "at": 950.0, "latency_s": 3.0}],
        },
        "rounds": {
            "policy": "lyra",
            "round_s": 60,
            "rounds_done": 3,
            "next_round_s": 1030,
            "now": 1000,
        },
    }
    launches = [
        [100.0, "j1", 1, {"workers": 2, "gpu_type": "v100"}],
        [200.0, "j1", 2, {"workers": 3}],
    ]
    d = assemble(
        overview, launches, {"name": "admin", "admin": True}, 1000.0, dashboard="http://d:1/"
    )
    assert [j["id"] for j in d["queue"]] == ["j2"] and d["queue"][0]["reason"] == "no GPUs"
    run = {j["id"]: j for j in d["running"]}
    assert run["j1"]["progress"] == 0.25 and run["j1"]["partner"] == "j3"
    assert [r["workers"] for r in run["j1"]["runs"]] == [2, 3]
    assert run["j1"]["links"]["ray_job"] == "http://d:1/#/jobs/raysubmit_1"
    assert "ray_job" not in run["j3"]["links"] and [j["id"] for j in d["ended"]] == ["j4"]
    assert d["rounds"]["next_in_s"] == 30 and "teams" not in d
    assert d["services"][0]["moe"] == {
        "replicas_per_layer": [3, 4],
        "devices": None,
        "busiest_share": 0.2,
    }
    assert assemble({**overview, "teams": {"a": {"guarantee": 4}}}, [], {}, 1000.0)["teams"] == {
        "a": {"guarantee": 4}
    }


def test_loan_chart_keeps_the_recorded_events_in_its_window() -> None:
    serving = {"lends": [{"node": "n", "at": 10.0}, {"node": "n", "at": 500.0}], "reclaims": []}
    got = loan_events(serving, 1000.0, 600.0)
    assert got["events"] == [{"kind": "lend", "node": "n", "at": 500.0}]
    assert got["start"] == 400.0
