"""Live capacity loaning: Ray Serve and Ray Train share the inference pool (Lyra).

One training server and two inference servers of the same GPU type, the ``lyra``
policy, a real Serve service (a small dense torch model behind an HTTP route) and a
real elastic Ray Train job. Under low load one inference server is lent and the job
grows onto it; under a spike that server is reclaimed, the job shrinks (it is not
killed) and finishes with exactly its steps, the service's replicas are back and
ready, and not one HTTP request fails along the way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ray.conftest import LiveCluster, start_pool_cluster, stop_cluster
from tests.ray.http_load import HttpLoad
from tests.ray.live_helpers import (
    assert_every_step_once,
    assert_placements_match,
    job,
    start_lending_scheduler,
    wait_until,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

GPU = "t4"


@pytest.fixture(scope="module")
def pool_cluster() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    live = start_pool_cluster(GPU)
    try:
        yield live
    finally:
        stop_cluster(live)


@pytest.fixture(scope="module")
def client(pool_cluster: LiveCluster) -> Any:
    from lyra_ray.sdk import Client

    start_lending_scheduler(pool_cluster.workdir)
    return Client(pool_cluster.address)


def _servers(client: Any) -> dict[str, str]:
    view = client.overview()
    return {n["id"]: n["state"] for n in view["nodes"] if n["pool"] == "inference"}


def _service(client: Any, name: str) -> dict[str, Any]:
    (svc,) = [s for s in client.overview()["serving"]["services"] if s["name"] == name]
    return dict(svc)


def test_bad_service_input_is_refused_and_changes_nothing(client: Any) -> None:
    from lyra_ray.sdk import LyraError, SpecError

    before = client.overview()["serving"]
    with pytest.raises(SpecError, match="'replicas_per_server'"):
        client.deploy_service({"name": "huge", "replicas_per_server": 3})  # 2 GPUs a server
    with pytest.raises(SpecError, match="'min_servers'"):
        client.deploy_service({"name": "wide", "min_servers": 3})  # 2 inference servers
    with pytest.raises(SpecError, match="'target_ongoing_per_replica'"):
        client.deploy_service({"name": "nan", "target_ongoing_per_replica": float("nan")})
    with pytest.raises(LyraError, match="'service'"):
        client.remove_service("nope")
    with pytest.raises(SpecError, match="'service'"):
        client.service_url("nope")
    after = client.overview()["serving"]
    assert after["services"] == before["services"] == []


LOW_RPS, SPIKE_RPS = 2.0, 40.0
"""With 300 ms per request and 3 requests in flight per replica (2 per server): ~0.6 in
flight at the low rate (one server), ~12 in the spike (both)."""


def test_lend_grow_reclaim_shrink_under_live_traffic(client: Any, tmp_path: Any) -> None:
    url = client.deploy_service(
        {
            "name": "dense",
            "model": "dense",
            "target_ongoing_per_replica": 3.0,
            "smoothing_s": 2.0,
            "down_after_s": 6.0,
            "config": {"service_ms": 300},
        }
    )
    # No service had a server until now, so both were lent; the service's floor takes one
    # back at once, and its replicas there are enough to take traffic.
    wait_until(lambda: _service(client, "dense")["ready"] >= 2, 180, "replicas ready")
    load = HttpLoad(url).start(rate=SPIKE_RPS)
    try:
        wait_until(lambda: _service(client, "dense")["ready"] == 4, 180, "both servers serving")
        log = tmp_path / "elastic.log"
        jid = client.submit(
            job(
                "elastic",
                900,
                log,
                min_workers=2,
                max_workers=4,
                throughput={GPU: 1.0},
                config={"step_sleep_s": 0.1, "checkpoint_every": 20},
            )
        )

        def workers() -> int:
            a = client.status(jid).get("assignment")
            return int(a["workers"]) if a else 0

        wait_until(lambda: workers() == 2 and _steps(log) > 0, 240, "the job on training")
        load.set_rate(LOW_RPS)
        wait_until(lambda: "lent" in _servers(client).values(), 180, "a server lent")
        (lent,) = [n for n, st in _servers(client).items() if st == "lent"]

        def sizes() -> list[int]:
            return [a["workers"] for _t, j, _g, a in client.call("launches") if j == jid]

        wait_until(lambda: sizes()[-1] == 4, 240, "the elastic job grown onto the lent server")
        grown = [a for _t, j, _g, a in client.call("launches") if j == jid][-1]
        assert lent in {n for n, _ in grown["nodes"]}, (lent, grown)
        wait_until(lambda: _steps(log) >= 20 + _steps_before(client, jid, log), 240, "stepping")

        load.set_rate(SPIKE_RPS)
        wait_until(lambda: sizes()[-1] == 2, 240, "the job shrunk off the reclaimed server")
        wait_until(lambda: _servers(client)[lent] == "serving", 240, "the server serving again")
        wait_until(lambda: _service(client, "dense")["ready"] == 4, 120, "replicas back, ready")
        st = client.wait(jid, timeout=600)  # the spike lasts: the server stays with serving
    finally:
        report = load.stop()
    assert st["status"] == "finished" and st["steps_done"] == 900, st
    assert st["num_preemptions"] == 0, st  # shrunk through checkpoint, never killed
    sizes = [a["workers"] for _t, j, _g, a in client.call("launches") if j == jid]
    assert sizes[:3] == [2, 4, 2], sizes
    assert_every_step_once(log, 900, slack=40)
    assert report["failures"] == {}, report
    assert report["ok"] == report["sent"] > 0, report
    reclaims = client.overview()["serving"]["reclaims"]
    assert any(r["node"] == lent for r in reclaims), reclaims


def _steps(log: Any) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _steps_before(client: Any, jid: str, log: Any) -> int:
    """Steps logged by generations that ran with fewer than 4 workers."""
    small = {g for _t, j, g, a in client.call("launches") if j == jid and a["workers"] < 4}
    if not log.exists():
        return 0
    return sum(
        1 for ln in log.read_text().splitlines() if ln.strip() and int(ln.split()[0]) in small
    )


def _nodes_of(client: Any, jid: str) -> dict[str, int]:
    a = client.status(jid).get("assignment")
    return {n: g for n, g in a["nodes"]} if a else {}


def test_live_reclaim_takes_the_server_the_knapsack_values_lowest(
    client: Any, pool_cluster: LiveCluster, tmp_path: Any
) -> None:
    """Two lent servers: one holds a whole rigid job, the other only flexible workers of
    an elastic job that also runs elsewhere. Serving needs one server back. Reclaiming
    the first would preempt the rigid job; reclaiming the second only shrinks the elastic
    one, so Lyra's knapsack takes the second — whatever their ids (naive reclaim goes by
    id)."""
    client.remove_service("dense")  # no service, no serving demand: both servers lent
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    slow = {"step_sleep_s": 0.2, "checkpoint_every": 20}
    tput = {GPU: 1.0}
    big = 20_000  # longer than the test: the jobs are cancelled at the end
    training = client.submit(
        job("rigid-t", big, tmp_path / "t.log", workers=2, throughput=tput, config=slow)
    )
    inference = set(_servers(client))
    wait_until(
        lambda: (
            bool(_nodes_of(client, training)) and not set(_nodes_of(client, training)) & inference
        ),
        180,
        "a rigid job filling the training server",
    )
    rigid = client.submit(
        job("rigid-r", big, tmp_path / "r.log", workers=1, throughput=tput, config=slow)
    )
    elastic = client.submit(
        job(
            "elastic-e",
            big,
            tmp_path / "e.log",
            min_workers=1,
            max_workers=3,
            throughput=tput,
            config=slow,
        )
    )
    wait_until(
        lambda: sum(_nodes_of(client, elastic).values()) == 3 and bool(_nodes_of(client, rigid)),
        240,
        "the rigid job and the elastic job (3 workers) on the lent servers",
    )
    on_r, on_e = _nodes_of(client, rigid), _nodes_of(client, elastic)
    (server_r,) = on_r
    (other,) = inference - {server_r}
    assert on_e.get(other, 0) >= 1 and 3 - on_e.get(other, 0) >= 1, (on_r, on_e)
    why = (
        f"reclaiming {server_r[:12]} would preempt rigid-r (its only server); reclaiming "
        f"{other[:12]} takes {on_e[other]} of elastic-e's 3 workers, leaving it >= its minimum"
    )
    client.deploy_service({"name": "dense2", "model": "dense", "config": {"service_ms": 50}})
    wait_until(
        lambda: any(st != "lent" for st in _servers(client).values()), 180, "a server reclaimed"
    )
    states = _servers(client)
    assert states[other] in ("reclaiming", "serving") and states[server_r] == "lent", (states, why)
    wait_until(
        lambda: sum(_nodes_of(client, elastic).values()) == 3 - on_e[other], 240, "a scale-in"
    )
    assert client.status(rigid)["num_preemptions"] == 0, why
    assert client.status(elastic)["num_preemptions"] == 0, why
    wait_until(lambda: _servers(client)[other] == "serving", 240, "the server serving")
    for jid in (training, rigid, elastic):
        client.cancel(jid)
    client.remove_service("dense2")


def test_flexible_workers_grow_onto_a_lent_server_of_another_type_and_shrink_back(
    client: Any, pool_cluster: LiveCluster, tmp_path: Any
) -> None:
    """Lyra's mixed-type jobs live (#21): an elastic job's base runs on a V100 training
    server; its flexible workers grow onto a lent T4 inference server (one Train run on
    two GPU types, each worker pinned by its node's label) and leave it when serving
    takes the server back: a shrink, not a preemption, and no step lost."""
    for svc in client.overview()["serving"]["services"]:
        client.remove_service(svc["name"])
    v100 = pool_cluster.add_gpu_node("v100", 2, pool="training")
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    inference = set(_servers(client))
    slow = {"step_sleep_s": 0.2, "checkpoint_every": 20}
    filler = client.submit(  # keeps the T4 training server busy: only lent T4s are left
        job("t4-filler", 20_000, tmp_path / "f.log", workers=2, throughput={GPU: 1.0}, config=slow)
    )
    wait_until(
        lambda: bool(_nodes_of(client, filler)) and not set(_nodes_of(client, filler)) & inference,
        180,
        "the filler on the T4 training server",
    )
    log = tmp_path / "mixed.log"
    total = 600
    jid = client.submit(
        job(
            "mixed",
            total,
            log,
            min_workers=2,
            max_workers=4,
            throughput={"v100": 1.0, GPU: 0.5},
            config={"step_sleep_s": 0.1, "checkpoint_every": 20},
        )
    )

    def spread() -> tuple[int, int]:
        """(workers on the V100 server, workers on lent servers) now."""
        nodes = _nodes_of(client, jid)
        return nodes.get(v100, 0), sum(g for n, g in nodes.items() if n in inference)

    wait_until(lambda: spread() == (2, 2), 300, "base on the V100s, flexible workers lent")
    a = client.status(jid)["assignment"]
    assert a["gpu_type"] == "v100" and a["workers"] == 4 and a.get("extra"), a
    wait_until(lambda: _steps(log) >= 20 + _steps_before(client, jid, log), 240, "stepping")
    assert_placements_match(client, jid)  # each worker reported the node it was pinned to
    client.deploy_service(
        {"name": "back", "model": "dense", "min_servers": 2, "config": {"service_ms": 50}}
    )
    wait_until(lambda: spread() == (2, 0), 240, "the flexible workers gone with the servers")
    assert not client.status(jid)["assignment"].get("extra")
    st = client.wait(jid, timeout=600)
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert st["num_preemptions"] == 0, st  # shrunk through a checkpoint, never killed
    assert_every_step_once(log, total, slack=20)
    client.cancel(filler)
    client.remove_service("back")


MOE_LOW_RPS, MOE_SPIKE_RPS = 0.2, 10.0
"""A MoE request takes ~50 ms here on a quiet host (a dozen expert calls per layer), more
on a loaded one. With 0.1 requests in flight per GPU as the target (0.2 per server): the
spike keeps >= 0.5 in flight (both servers, with margin); the low rate needs one server
as long as a request takes under a second."""


def _plan(client: Any) -> dict[str, Any]:
    return dict(_service(client, "moe").get("plan") or {})


def test_moe_service_replans_its_experts_on_lend_and_reclaim(client: Any) -> None:
    """The MoE service (a transformers Mixtral) on the lyra cluster: its expert replicas
    follow the servers lyra lends and reclaims. The replica budget per layer is the serving
    GPUs times their slots; a lend lowers it and the planner re-plans onto the server
    left, a reclaim plans back, popular experts always get the most replicas, and no
    request fails."""
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    slots = 3
    url = client.deploy_service(
        {
            "name": "moe",
            "model": "moe",
            "target_ongoing_per_replica": 0.1,
            "smoothing_s": 2.0,
            "down_after_s": 6.0,
            # GPU-like timing, set explicitly: each call takes the H200 time of a
            # Mixtral-sized expert; 1,024 routed tokens a request-layer, past its knee, so
            # the plan for this batch regime gives popular experts more replicas
            "config": {
                "slots": slots,
                "emulate": 1,
                "cost_dim": 4096,
                "cost_hidden": 14336,
                "batch": 8,
                "seq": 128,
                "replan_s": 0,
            },
        }
    )
    wait_until(lambda: _plan(client).get("devices") == 2, 180, "the MoE service on one server")
    load = HttpLoad(url).start(rate=MOE_SPIKE_RPS)
    try:
        wait_until(lambda: _plan(client).get("devices") == 4, 240, "a server reclaimed for MoE")
        load.set_rate(MOE_LOW_RPS)
        wait_until(lambda: _plan(client).get("devices") == 2, 240, "a server lent again")
        wait_until(lambda: "lent" in _servers(client).values(), 120, "the server lent")
        load.set_rate(MOE_SPIKE_RPS)
        wait_until(lambda: _plan(client).get("devices") == 4, 240, "the server reclaimed")
    finally:
        report = load.stop()
    assert report["failures"] == {}, report
    assert report["ok"] == report["sent"] > 0, report
    replans = _plan(client)["replans"]
    budgets = [r["budget_per_layer"] for r in replans]
    # one server (2 GPUs) -> both -> one (the lend) -> both (the reclaim)
    assert budgets[:4] == [2 * slots, 4 * slots, 2 * slots, 4 * slots], replans
    for r in replans:
        for counts, share in zip(r["counts"], r["planned_share"], strict=True):
            assert sum(counts) == r["replicas_per_layer"] <= r["budget_per_layer"], r
            assert min(counts) >= 1, r
            # Lina: the expert the plan expects most tokens at gets the most replicas
            assert counts[share.index(max(share))] == max(counts), r
    assert any(len(set(c)) > 1 for r in replans for c in r["counts"]), replans
    client.remove_service("moe")
