"""One GPU of a server serving the lyra MoE service: the expert replicas the plan puts here.

WHY its own module: the ingress (:mod:`lyra_ray.serving.moe_app`) plans and routes; a
device only holds its experts' slices of the model's fused expert tensors and runs the
chunks it is sent, one at a time (a GPU runs one kernel at a time). By default a call's
time is its real computation: the SwiGLU of the slice on the chunk's tokens, on the
replica's GPU where there is one (:class:`ExpertRunner`), else in numpy on the CPU.

Emulation is explicit: a spec with ``emulate: 1`` makes each call take the H200
expert-time model of its tokens (``lyra_ray.moe_serving.expert_time``, for the expert
shape ``cost_dim`` x ``cost_hidden``), slept out after the real computation; a spec that
sets ``service_ms`` gets that constant per call on top of it (:func:`call_seconds`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ray import serve

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.experts import ExpertSlice, swiglu
from lyra_ray.serving.spec import moe_knobs

DEVICE_GPU = "h200"
"""The GPU type whose expert-time model an emulating device's calls take (the one measured)."""


PROFILE_TOKENS, PROFILE_REPEATS, PROFILE_WARMUP = 256, 50, 5
"""The device's expert time is timed at 1 and at ``PROFILE_TOKENS`` tokens, the best of
``PROFILE_REPEATS`` runs each after ``PROFILE_WARMUP`` untimed ones. WHY so many: on a CPU
the first calls in a fresh process ran 1.5-2x slow (cold caches and clocks), and a best
of 7 taken from them put the 256-token/1-token ratio at 5.4 where it is 8.4 once warm.
At the live drift test's regime that moved the plans across the knee: 8 replicas a layer
instead of 12, and a topic shift whose re-plan then predicted a 3 % gain, below the
gate's 10 %, so the service kept a plan whose busiest replica held 2.3x the mean
(2026-12-01). The whole profile costs ~6 ms on a CPU, less on a GPU."""


def call_seconds(service_ms: float | None, expert: ExpertCost | None, tokens: int) -> float:
    """Seconds one expert call of ``tokens`` tokens must last: the spec's ``service_ms`` if it
    sets one (the same for every call), else the emulated model's, else 0 (the call lasts
    as long as its computation)."""
    if service_ms is not None:
        return service_ms / 1000.0
    return 0.0 if expert is None else expert.seconds(tokens)


def device_service_ms(config: Mapping[str, Any]) -> float | None:
    """The spec's ``service_ms``, or None when it leaves it out."""
    raw = config.get("service_ms")
    return None if raw is None else float(raw)


def emulated_expert(config: Mapping[str, Any], dim: int, hidden: int) -> ExpertCost | None:
    """The expert shape whose H200 time an ``emulate: 1`` spec's calls take; None: compute."""
    if not int(config.get("emulate", 0)):
        return None
    return ExpertCost(int(config.get("cost_dim", dim)), int(config.get("cost_hidden", hidden)))


def has_cuda() -> bool:
    """A real NVIDIA GPU is here (its driver's control device), checked before torch is
    imported: the fake GPUs of a CPU-only test cluster have none, and a device process
    that never imports torch saves ~200 MB."""
    return os.path.exists("/dev/nvidiactl")


class ExpertRunner:
    """Runs expert slices: on the replica's GPU (torch, CUDA) where there is one, else numpy.

    On a GPU, a slice's weights are moved there once, when the device takes it; chunks
    cross as numpy arrays (the ingress's wire format) and are copied in and out."""

    def __init__(self, cuda: bool | None = None) -> None:
        self.cuda = has_cuda() if cuda is None else cuda
        if self.cuda:
            import torch

            self.cuda = bool(torch.cuda.is_available())
        self.kind = "cuda" if self.cuda else "numpy"

    def prepare(self, w: ExpertSlice) -> Any:
        if not self.cuda:
            return w
        import torch

        return (torch.from_numpy(w.gate_up).cuda(), torch.from_numpy(w.down).cuda())

    def run(self, x: Any, w: Any) -> Any:
        if not self.cuda:
            return swiglu(x, w)
        import torch

        gate_up, down = w
        xt = torch.from_numpy(x).cuda()
        g, u = (xt @ gate_up.T).chunk(2, dim=-1)
        y = (torch.nn.functional.silu(g) * u) @ down.T
        return y.cpu().numpy()


@serve.deployment(max_ongoing_requests=10_000, ray_actor_options={"num_cpus": 0})
class MoEDevice:
    """One GPU: the expert replicas the plan puts here, run one call at a time."""

    def __init__(
        self,
        node_id: str,
        index: int,
        service_ms: float | None,
        peers: list[Any] | None = None,
        emulate: ExpertCost | None = None,
    ) -> None:
        """``peers``: the server's other devices, reachable through this one (``gpu0``);
        ``emulate``: the expert whose H200 time each call takes (None: its computation's)."""
        self.node_id, self.index = node_id, index
        self.service_ms = service_ms
        self.emulate = emulate
        self.runner = ExpertRunner()
        self.hosted: dict[tuple[int, int], Any] = {}
        self.spare: dict[tuple[int, int], Any] = {}  # the last expert fetched, kept (Lina's spare)
        self.fetched = 0
        self._lock: asyncio.Lock | None = None

    async def host(self, experts: list[tuple[int, int, list[Any]]]) -> int:
        """Hold exactly these (layer, expert, [slice ref]) replicas; returns how many."""
        keep: dict[tuple[int, int], Any] = {}
        for layer, e, ref in experts:
            key = (layer, e)
            if key in self.hosted:
                keep[key] = self.hosted[key]
            else:
                keep[key] = self.runner.prepare(await ref[0])
        self.hosted = keep
        return len(keep)

    async def __call__(self, layer: int, expert: int, x: Any, ref: list[Any]) -> Any:
        w = self.hosted.get((layer, expert), self.spare.get((layer, expert)))
        if w is None:  # borrowed, or moved away under a request still running: fetch it
            w = self.runner.prepare(await ref[0])
            self.fetched, self.spare = self.fetched + 1, {(layer, expert): w}
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            start = time.perf_counter()
            y = self.runner.run(x, w)
            left = call_seconds(self.service_ms, self.emulate, len(x))
            if self.service_ms is None:  # the model's time is the whole call's
                left -= time.perf_counter() - start
            if left > 0:
                await asyncio.sleep(left)
        return y

    async def run(self, layer: int, parts: list[tuple[int, Any, list[Any]]]) -> list[Any]:
        """Every chunk of one request-layer that runs here, ``(expert, rows, [slice ref])``
        each, in one call; their outputs in that order. WHY one call per device, not per
        chunk: the chunks run one at a time under the device lock either way, and each Serve
        call costs the ingress and the device CPU; on two loaded cores those calls were what
        held requests for seconds."""
        return [await self(layer, expert, x, ref) for expert, x, ref in parts]

    async def profile(self, ref: list[Any], many: int = PROFILE_TOKENS) -> tuple[float, float]:
        """This device's time for one expert slice at 1 and at ``many`` tokens (the best of
        a few runs, under the lock): what the ingress's cost model is fitted to when the
        calls are not emulated (``expert_time.host_roofline``)."""
        import numpy as np

        w = self.runner.prepare(await ref[0])
        dim = int(np.asarray((await ref[0]).down).shape[0])
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return time_expert(lambda x: self.runner.run(x, w), dim, many)

    def backend(self) -> str:
        """Where this device computes its experts: ``cuda`` or ``numpy``."""
        return str(self.runner.kind)


def time_expert(
    run: Callable[[Any], Any],
    dim: int,
    many: int = PROFILE_TOKENS,
    repeats: int = PROFILE_REPEATS,
    warmup: int = PROFILE_WARMUP,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """``run``'s best seconds on 1 and on ``many`` token vectors of ``dim`` (interleaved, so
    a slow spell of the host touches both alike), after ``warmup`` untimed rounds."""
    import numpy as np

    rng = np.random.default_rng(0)
    best = [float("inf"), float("inf")]
    for round_ in range(warmup + repeats):
        for i, n in enumerate((1, many)):
            x = rng.standard_normal((n, dim)).astype(np.float32)
            start = clock()
            run(x)
            if round_ >= warmup:
                best[i] = min(best[i], clock() - start)
    return best[0], best[1]


def _model_shape(config: dict[str, Any]) -> tuple[int, int]:
    """The expert shape (dim, inter) the knobs give, for an emulated device's default."""
    k = moe_knobs(config)
    hf = dict(k.get("hf_config") or {})
    dim = int(hf.get("hidden_size", k["dim"]))
    inter = hf.get("moe_intermediate_size", hf.get("intermediate_size", k["hidden"]))
    return dim, int(inter)


def moe_backend(node_id: str, gpus: int, config: dict[str, Any]) -> Any:
    """The bound backend application of a MoE service on one server: one device per GPU."""
    service_ms, k = device_service_ms(config), moe_knobs(config)
    emulate = emulated_expert(k, *_model_shape(config))
    opts = {"num_gpus": 1, "num_cpus": 0, "label_selector": {NODE_ID_LABEL: node_id}}

    def device(k: int) -> Any:
        return MoEDevice.options(  # type: ignore[attr-defined]
            name=f"gpu{k}", num_replicas=1, ray_actor_options=opts
        )

    peers = [device(k).bind(node_id, k, service_ms, None, emulate) for k in range(1, gpus)]
    return device(0).bind(node_id, 0, service_ms, peers, emulate)
