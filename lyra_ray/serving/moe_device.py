"""One GPU of a server serving the lyra MoE service: the expert replicas the plan puts here.

WHY its own module: the ingress (:mod:`lyra_ray.serving.moe_app`) plans and routes; a
device only holds weights and runs the chunks it is sent, one at a time (a GPU runs one
kernel at a time), each taking the H200 expert-time model of its tokens
(``lyra_ray.moe_serving.expert_time``: a roofline with a launch floor) for the expert
shape ``cost_dim`` x ``cost_hidden``, slept out here after the real (small) expert runs;
a spec that sets ``service_ms`` gets that constant per call instead (:func:`call_seconds`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from ray import serve

from lyra_ray.moe_serving.expert_time import ExpertCost

DEVICE_GPU = "h200"
"""The GPU type whose expert-time model a device's calls take (the one measured)."""


def call_seconds(service_ms: float | None, expert: ExpertCost, tokens: int) -> float:
    """Device seconds of one expert call of ``tokens`` tokens: the spec's ``service_ms``
    if it sets one (the same for every call), else the expert-time model's."""
    if service_ms is not None:
        return service_ms / 1000.0
    return expert.seconds(tokens)


def device_service_ms(config: Mapping[str, Any]) -> float | None:
    """The spec's ``service_ms``, or None when it leaves it out (then the model decides)."""
    raw = config.get("service_ms")
    return None if raw is None else float(raw)


@serve.deployment(max_ongoing_requests=10_000, ray_actor_options={"num_cpus": 0})
class MoEDevice:
    """One GPU: the expert replicas the plan puts here, run one call at a time; each call
    sleeps, inside the device lock, the GPU time of its kernel, which the CPU-only hosts
    here cannot give (:func:`call_seconds` of its tokens for ``expert`` = (dim, hidden))."""

    def __init__(
        self,
        node_id: str,
        index: int,
        service_ms: float | None,
        peers: list[Any] | None = None,
        expert: tuple[int, int] = (32, 64),
    ) -> None:
        """``peers``: the server's other devices, reachable through this one (``gpu0``)."""
        self.node_id, self.index = node_id, index
        self.service_ms = service_ms
        self.expert = ExpertCost(expert[0], expert[1], DEVICE_GPU)
        self.hosted: dict[tuple[int, int], Any] = {}
        self.spare: dict[tuple[int, int], Any] = {}  # the last expert fetched, kept (Lina's spare)
        self.fetched = 0
        self._lock: asyncio.Lock | None = None

    async def host(self, experts: list[tuple[int, int, list[Any]]]) -> int:
        """Hold exactly these (layer, expert, [weights ref]) replicas; returns how many."""
        keep: dict[tuple[int, int], Any] = {}
        for layer, e, ref in experts:
            key = (layer, e)
            keep[key] = self.hosted[key] if key in self.hosted else await ref[0]
        self.hosted = keep
        return len(keep)

    async def __call__(self, layer: int, expert: int, x: Any, ref: list[Any]) -> Any:
        from lyra_ray.moe_serving.experts import expert_ffn

        w = self.hosted.get((layer, expert), self.spare.get((layer, expert)))
        if w is None:  # borrowed, or moved away under a request still running: fetch it
            w = await ref[0]
            self.fetched, self.spare = self.fetched + 1, {(layer, expert): w}
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            start = time.perf_counter()
            y = expert_ffn(x, w)
            left = call_seconds(self.service_ms, self.expert, len(x))
            if self.service_ms is None:  # the model's time is the whole call's
                left -= time.perf_counter() - start
            if left > 0:
                await asyncio.sleep(left)
        return y

    async def run(self, layer: int, parts: list[tuple[int, Any, list[Any]]]) -> list[Any]:
        """Every chunk of one request-layer that runs here, ``(expert, rows, [weights
        ref])`` each, in one call; their outputs in that order. WHY one call per device,
        not per chunk: the chunks run one at a time under the device lock either way, and
        each Serve call costs the ingress and the device CPU (with borrowing a layer's
        tokens go to every replica: 12 calls a layer on 4 devices of 3 slots, 4 this way);
        on two loaded cores those calls were what held requests for seconds."""
        return [await self(layer, expert, x, ref) for expert, x, ref in parts]
