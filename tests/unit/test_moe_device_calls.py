"""The live MoE service's expert calls: one Serve call per device and request-layer.

WHY: with borrowing, a layer's tokens go to every replica (12 on 4 devices of 3 slots); a
Serve call per chunk cost the ingress and devices the CPU that, on two loaded cores, held
requests for seconds. These check that the batching keeps what the per-chunk calls gave:
each chunk on the device the table names, each expert's rows back in their order, and the
device's output for a chunk the same as its single call's. No cluster: the plain classes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from lyra_ray.moe_serving.experts import ExpertSlice  # noqa: E402
from lyra_ray.serving.moe_app import MoEServiceIngress  # noqa: E402
from lyra_ray.serving.moe_device import MoEDevice  # noqa: E402
from lyra_ray.serving.moe_plan import RoutingTable, devices_of, plan_devices  # noqa: E402

DIM = 8


def _weights(seed: int) -> ExpertSlice:
    rng = np.random.default_rng(seed)
    return ExpertSlice(
        rng.standard_normal((32, DIM), dtype=np.float32),
        rng.standard_normal((DIM, 16), dtype=np.float32),
    )


def test_a_device_runs_a_request_layers_chunks_in_one_call_as_one_call_each() -> None:
    dev = MoEDevice.func_or_class("n", 0, 0.0, None, None)  # type: ignore[attr-defined]
    dev.hosted = {(0, 0): _weights(0), (0, 2): _weights(2)}
    rng = np.random.default_rng(1)
    parts = [
        (e, rng.standard_normal((n, DIM), dtype=np.float32), [None])
        for e, n in ((2, 3), (0, 5), (2, 1))
    ]

    async def go() -> tuple[list[Any], list[Any]]:
        one = [await dev(0, e, x, ref) for e, x, ref in parts]
        return one, await dev.run(0, parts)

    one, batched = asyncio.run(go())
    assert [y.shape for y in batched] == [(3, DIM), (5, DIM), (1, DIM)]
    for a, b in zip(one, batched, strict=True):
        np.testing.assert_array_equal(a, b)


class _Handle:
    def __init__(self, device: int, calls: Counter[int]) -> None:
        self.device, self.calls = device, calls
        self.run = self

    def remote(self, layer: int, parts: list[tuple[int, Any, list[Any]]]) -> Any:
        """Each chunk's output is its rows plus 100 x the device and 1000 x the expert."""
        self.calls[self.device] += 1

        async def answer() -> list[Any]:
            return [x + 100 * self.device + 1000 * e for e, x, _ref in parts]

        return answer()


def test_the_ingress_sends_each_device_one_call_and_puts_every_chunk_back_in_place() -> None:
    devices = devices_of({"a": 2, "b": 2})
    load = np.array([[40.0, 10.0, 5.0, 1.0]])
    table = RoutingTable(devices, plan_devices(load, len(devices), 3))
    calls: Counter[int] = Counter()
    ingress = MoEServiceIngress.func_or_class.__new__(MoEServiceIngress.func_or_class)  # type: ignore[attr-defined]
    ingress.torch = torch
    ingress.weights = [[f"w{e}" for e in range(4)]]
    ingress._handle = lambda dev: _Handle(devices.index(dev), calls)
    from lyra_ray.moe_serving.dynamic import chunk_hosts

    counts = np.array([9, 4, 3, 1])
    where = table.devices_for(0, chunk_hosts(counts, table.counts[0]))
    work = [(e, np.arange(n * DIM, dtype=np.float32).reshape(n, DIM)) for e, n in enumerate(counts)]
    outs = asyncio.run(ingress._experts(table, 0, work, where))

    used = {d for e in range(4) for d in where[e]}
    assert calls == Counter({d: 1 for d in used}) and len(used) == 4  # one call per device
    for (e, x), y, devs in zip(work, outs, where, strict=True):
        chunks = np.array_split(x, len(devs))
        want = np.concatenate([c + 100 * d + 1000 * e for c, d in zip(chunks, devs, strict=True)])
        np.testing.assert_array_equal(y, want)
