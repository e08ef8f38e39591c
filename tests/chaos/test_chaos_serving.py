"""Serving under faults (issue #31, item 5): open-loop traffic on a dense service and the
MoE service, both owned by the scheduler, while one thing at a time breaks.

One real local cluster (a head and three two-GPU inference servers) and one scheduler
(the ``lyra`` policy, lending what serving does not need); the dense service keeps two
servers at least, so a server is lent at low load and reclaimed at a spike. In order:

1. a dense replica's process is SIGKILLed: the ingress sends its requests in flight
   once more, to another server; no request fails;
2. the dense service's ingress replica is SIGKILLed: Serve starts a new one, which knows
   no servers; the scheduler sees its routing differ and tells it; requests in flight on
   the dead ingress fail (counted), none after;
3. the scheduler is killed while a reclaim is under way: the restarted scheduler goes on
   with the reclaim from its saved state; no request fails;
4. a serving server is taken away (its node's processes killed): requests in flight
   there are sent again; the scheduler deletes the lost server's apps and reclaims the
   lent one; what failed is counted.

For each: the failed requests (by HTTP status or error, with and without the client's
one retry), the seconds until capacity is back and the scheduler's view of the pool and
Ray Serve's agree (:func:`~tests.chaos.serving_faults.disagreements`).
``LYRA_CHAOS=full`` (``python benchmarks/chaos.py --only serving``) runs longer windows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.chaos.helpers import record, size, wait_for
from tests.chaos.serving_faults import (
    Traffic,
    disagreements,
    full,
    replica_pids,
    server_states,
    serving_servers,
    sigkill,
    wait_recovered,
)
from tests.ray.conftest import LiveCluster, start_cluster
from tests.ray.live_helpers import start_lending_scheduler

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

GPU = "t4"
LOW = {"dense": 1.0, "moe": 0.5}
HIGH = {"dense": 12.0, "moe": 4.0}
"""Dense: 50 ms a request or more, one replica per server, 0.15 in flight per replica as
the target: the low rate needs one server (the floor keeps two), the high one all three.
MoE: a few requests a second."""
DENSE_REPLICA, DENSE_INGRESS = "ServeReplica:lyra-dense--", "ServeReplica:lyra-dense:ingress"
SETTLE_S = size(4, 30)
"""Traffic kept flowing after capacity is back, to see that nothing fails then."""


@pytest.fixture(scope="module")
def live() -> Iterator[LiveCluster]:
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = saved or f"/tmp/lyra-chaos-{os.getuid()}"
    cluster = start_cluster(nodes=())
    for _ in range(3):
        cluster.add_gpu_node(GPU, 2, pool="inference")
    cluster.cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)


@pytest.fixture(scope="module")
def client(live: LiveCluster) -> Any:
    from lyra_ray.sdk import Client

    start_lending_scheduler(live.workdir)
    return Client(live.address, retry_s=180.0)


@pytest.fixture(scope="module")
def urls(client: Any) -> dict[str, str]:
    common = {"smoothing_s": 1.0, "down_after_s": 4.0}
    out = {
        "dense": client.deploy_service(
            {
                "name": "dense",
                "model": "dense",
                "min_servers": 2,
                "replicas_per_server": 1,  # the other GPU is the MoE device's
                "target_ongoing_per_replica": 0.15,
                "config": {"service_ms": 50},
                **common,
            }
        ),
        "moe": client.deploy_service(
            {
                "name": "moe",
                "model": "moe",
                "target_ongoing_per_replica": 2.0,
                "config": {"slots": 4, "service_ms": 2, "replan_s": 0},
                **common,
            }
        ),
    }
    wait_for(lambda: len(serving_servers(client)) >= 2, 240, "two servers serving")
    wait_for(lambda: not disagreements(client), 240, "both services running")
    return out


def _steady(client: Any, traffic: Traffic, rates: dict[str, float]) -> None:
    """Traffic at ``rates`` and the pool settled (views agree, every replica ready)."""
    traffic.set_rates(rates)
    wait_for(lambda: full(client) and not disagreements(client), 240, "the pool settled")


def _report(name: str, fault: dict[str, Any], recovered_s: float, result: Any) -> None:
    record(f"serving_{name}", {**fault, "recovered_s": recovered_s, "views_agree": True, **result})


def test_a_killed_replica_loses_no_request(client: Any, live: LiveCluster, urls: Any) -> None:
    traffic = Traffic(urls, HIGH)
    try:
        _steady(client, traffic, HIGH)
        replicas = replica_pids(DENSE_REPLICA)
        t0 = time.monotonic()
        pid = sigkill(min(replicas))

        def replaced() -> bool:  # a new replica in its place, and the scheduler counts it
            now = replica_pids(DENSE_REPLICA)
            return pid not in now and bool(now - replicas) and full(client)

        took = wait_recovered(client, replaced, t0, 180)
        time.sleep(SETTLE_S)
    finally:
        result = traffic.stop()
    _report("replica_kill", {"killed": DENSE_REPLICA, "pid": pid}, took, result)
    for name in ("dense", "moe"):
        assert result[name]["failures"] == {} and result[name]["ok"] > 0, result


def test_a_killed_ingress_is_told_its_servers_again(
    client: Any, live: LiveCluster, urls: Any
) -> None:
    traffic = Traffic(urls, HIGH)
    try:
        _steady(client, traffic, HIGH)
        (victim,) = replica_pids(DENSE_INGRESS)
        t0 = time.monotonic()
        pid = sigkill(victim)

        def replaced() -> bool:
            now = replica_pids(DENSE_INGRESS)
            return pid not in now and bool(now) and full(client)

        took = wait_recovered(client, replaced, t0, 180)
        during = traffic.stop()
        traffic = Traffic(urls, HIGH)  # after recovery: nothing may fail
        time.sleep(SETTLE_S)
    finally:
        after = traffic.stop()
    _report(
        "ingress_kill",
        {"killed": DENSE_INGRESS, "pid": pid, "after": after},
        took,
        during,
    )
    assert during["moe"]["failures"] == {}, during  # another service's ingress: untouched
    for name in ("dense", "moe"):
        assert after[name]["failures"] == {} and after[name]["ok"] > 0, after


def test_killing_the_scheduler_mid_reclaim_loses_no_request(
    client: Any, live: LiveCluster, urls: Any
) -> None:
    import ray

    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR

    traffic = Traffic(urls, LOW)
    try:
        wait_for(lambda: "lent" in server_states(client).values(), 180, "a server lent")
        (lent,) = [n for n, st in server_states(client).items() if st == "lent"]
        restarts = int(client.call("ping")["restarts"])
        traffic.set_rates(HIGH)
        wait_for(lambda: server_states(client)[lent] == "reclaiming", 120, "a reclaim", 0.1)
        t0 = time.monotonic()
        ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE), no_restart=False)
        wait_for(lambda: int(client.call("ping")["restarts"]) > restarts, 120, "a restart")
        took = wait_recovered(client, lambda: server_states(client)[lent] == "serving", t0, 180)
        time.sleep(SETTLE_S)
    finally:
        result = traffic.stop()
    _report("scheduler_kill_mid_reclaim", {"server": lent}, took, result)
    reclaims = [r for r in client.overview()["serving"]["reclaims"] if r["node"] == lent]
    assert reclaims, "the reclaim did not finish after the restart"
    for name in ("dense", "moe"):
        assert result[name]["failures"] == {} and result[name]["ok"] > 0, result


def test_a_lost_server_is_replaced_by_the_lent_one(
    client: Any, live: LiveCluster, urls: Any
) -> None:
    traffic = Traffic(urls, LOW)
    try:
        wait_for(lambda: "lent" in server_states(client).values(), 180, "a server lent")
        _steady(client, traffic, LOW)
        before = serving_servers(client)
        (victim, *_) = sorted(before)
        t0 = time.monotonic()
        live.cluster.remove_node(live.nodes.pop(victim), allow_graceful=False)  # SIGKILL
        took = wait_recovered(
            client,
            lambda: (
                victim not in server_states(client)
                and len(serving_servers(client)) >= len(before)
                and full(client)
            ),
            t0,
            240,
        )
        during = traffic.stop()
        traffic = Traffic(urls, LOW)
        time.sleep(SETTLE_S)
    finally:
        after = traffic.stop()
    _report("node_loss", {"server": victim, "after": after}, took, during)
    for name in ("dense", "moe"):
        assert after[name]["failures"] == {} and after[name]["ok"] > 0, after
