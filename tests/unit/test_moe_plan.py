"""The live MoE service's plan over serving GPUs (lyra_ray.serving.moe_plan)."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.moe_serving.dynamic import chunk_hosts, static_hosts
from lyra_ray.serving.moe_plan import RoutingTable, devices_of, plan_devices


def _table(servers: dict[str, int], load: list[list[float]], slots: int) -> RoutingTable:
    devices = devices_of(servers)
    return RoutingTable(devices, plan_devices(np.asarray(load), len(devices), slots))


LOAD = [[50.0, 20.0, 5.0, 1.0], [1.0, 1.0, 30.0, 8.0]]


def test_the_budget_follows_the_serving_gpus() -> None:
    both = _table({"a": 2, "b": 2}, LOAD, slots=3)
    one = _table({"a": 2}, LOAD, slots=3)
    assert both.summary()["budget_per_layer"] == 12 and one.summary()["budget_per_layer"] == 6
    assert both.nodes == {"a", "b"} and one.nodes == {"a"}
    for t in (both, one):
        counts = t.counts
        assert (counts.sum(1) == t.summary()["budget_per_layer"]).all() and counts.min() >= 1
        # the most loaded expert of each layer gets the most replicas
        assert [int(np.argmax(c)) for c in counts] == [0, 2]
        # every device holds exactly its slots of each layer
        for i in range(len(t.devices)):
            per_layer = np.bincount([la for la, _e in t.hosted(i)], minlength=2)
            assert per_layer.tolist() == [3, 3]


def test_a_layer_with_no_load_is_planned_as_even() -> None:
    t = _table({"a": 1}, [[0.0, 0.0], [3.0, 1.0]], slots=4)
    assert t.counts.tolist()[0] == [2, 2]


@pytest.mark.parametrize("split", [chunk_hosts, static_hosts])
def test_no_replica_gets_two_chunks_of_one_request_layer(split: object) -> None:
    t = _table({"a": 2, "b": 2}, LOAD, slots=3)
    rng = np.random.default_rng(0)
    for _ in range(200):
        tokens = rng.integers(0, 20, size=4)
        if tokens.sum() == 0:
            continue
        for layer in range(2):
            hosts = split(tokens, t.counts[layer])  # type: ignore[operator]
            where = t.devices_for(layer, hosts)
            flat = [
                (h, d)
                for hs, ds in zip(hosts, where, strict=True)
                for h, d in zip(hs, ds, strict=True)
            ]
            for h, d in flat:
                assert d in t.replicas[layer][h]  # a chunk runs where its host has a replica
            per_replica = {}
            for h, d in flat:
                per_replica[(h, d)] = per_replica.get((h, d), 0) + 1
            hosted = {(h, d): t.replicas[layer][h].count(d) for h, d in per_replica}
            assert all(n <= hosted[k] for k, n in per_replica.items())
