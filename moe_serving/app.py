"""The Ray Serve application: an ingress that runs attention and gating, expert deployments.

WHY this shape (Lina on Serve): one deployment per (layer, expert), whose replica count is the
planner's replica count for that expert, each replica on its own GPU slot. The ingress runs
embedding, attention and the gate for a whole batch of tokens, splits each expert's tokens
into as many chunks as the expert has replicas (so a popular expert's batch is shared by its
replicas, as Lina does), awaits all calls of a layer together, and combines. A Serve handle
call costs milliseconds here, so tokens travel in batches, never one by one.

With borrowing on (Lina's per-batch side, ``dynamic.py``), a request whose own mix needs more
chunks of an expert than it has replicas sends the extra chunks to replicas of experts the
request leaves idle. Such a replica fetches the borrowed expert's parameters from the object
store (the ingress put them there) unless it still holds them from an earlier borrow; in the
calibrated mode the fetch costs the measured transfer time of a device-sized expert.

Re-planning changes only replica counts, through Serve's external scaler (``scaler.py``), so
replicas of experts whose count does not drop keep running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.util import metrics

from lyra_ray.moe_serving.dynamic import chunk_hosts, static_hosts
from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.experts import ExpertWeights, expert_ffn
from lyra_ray.moe_serving.model import MoEConfig, MoEModel

log = logging.getLogger(__name__)
APP_NAME = "moe"
INGRESS_NAME = "moe_ingress"


def expert_name(layer: int, expert: int) -> str:
    return f"expert_l{layer}_e{expert}"


@dataclass(frozen=True)
class ServiceTime:
    """Calibrated device service time: ``fixed_s + per_token_s * tokens`` per call, or, with
    ``expert``, the expert-time model of the call's tokens (``expert_time.py``: a roofline
    with a launch floor, fitted to an H200).

    Used by the benchmark's calibrated mode, where each replica stands for one device: the
    replica computes the real output, then sleeps out the rest of the calibrated time. One
    call at a time per replica (``max_ongoing_requests=1``), as on a device. The ingress
    sends it with every call, so a mode switch needs no redeploy.
    """

    fixed_s: float
    per_token_s: float
    transfer_s: float = 0.0  # fetching a borrowed expert's parameters
    expert: ExpertCost | None = None

    def seconds(self, tokens: int, fetched: bool = False) -> float:
        busy = (
            self.fixed_s + self.per_token_s * tokens
            if self.expert is None
            else self.expert.seconds(tokens)
        )
        return busy + (self.transfer_s if fetched else 0.0)


@dataclass(frozen=True)
class Borrow:
    """Run another expert of the layer: its id and its parameters in the object store.

    The reference sits inside a list so that Ray hands it over unresolved: a replica that
    still holds the expert never fetches it.
    """

    expert: int
    weights: list[Any] = field(hash=False)


@serve.deployment(max_ongoing_requests=1, ray_actor_options={"num_cpus": 0})
class ExpertReplica:
    """One replica of one expert FFN (numpy; no torch in these processes).

    It also runs borrowed chunks of the layer's other experts and keeps the last ``spare``
    borrowed experts' parameters, as a device keeps a replica it was lent until it needs
    the memory.
    """

    def __init__(self, weights: ExpertWeights, spare: int = 1) -> None:
        self.w = weights
        self.spare = spare
        self.borrowed: OrderedDict[int, ExpertWeights] = OrderedDict()

    def _weights(self, borrow: Borrow | None) -> tuple[ExpertWeights, bool]:
        """The parameters to run, and whether they had to be fetched."""
        if borrow is None:
            return self.w, False
        if borrow.expert in self.borrowed:
            self.borrowed.move_to_end(borrow.expert)
            return self.borrowed[borrow.expert], False
        import ray

        w: ExpertWeights = ray.get(borrow.weights[0])
        self.borrowed[borrow.expert] = w
        while len(self.borrowed) > self.spare:
            self.borrowed.popitem(last=False)
        return w, True

    def __call__(
        self,
        x: npt.NDArray[np.float32],
        service: ServiceTime | None = None,
        borrow: Borrow | None = None,
    ) -> tuple[npt.NDArray[np.float32], bool]:
        """The expert's output for ``x``, and whether a borrowed expert was fetched."""
        start = time.perf_counter()
        w, fetched = self._weights(borrow)
        y = expert_ffn(x, w)
        if service is not None:
            left = service.seconds(x.shape[0], fetched) - (time.perf_counter() - start)
            if left > 0:
                time.sleep(left)
        return y, fetched

    def transfer_seconds(self, dim: int, hidden: int, repeats: int = 3) -> float:
        """Median time, in this process, to copy an expert's parameters of the given shape.

        The calibrated mode's stand-in for fetching a device-sized expert: a copy at this
        host's memory bandwidth, timed where the compute is timed.
        """
        src = [np.ones((hidden, dim), np.float32), np.ones((dim, hidden), np.float32)]
        dst = [np.empty_like(a) for a in src]
        times = []
        for _ in range(repeats + 1):  # the first copy also faults the pages in
            t0 = time.perf_counter()
            for s, d in zip(src, dst, strict=True):
                np.copyto(d, s)
            times.append(time.perf_counter() - t0)
        return float(np.median(times[1:]))

    def compute_seconds(self, tokens: int, dim: int, hidden: int, repeats: int = 3) -> float:
        """Median wall time, in this process, of an expert FFN of the given shape."""
        rng = np.random.default_rng(0)
        w = ExpertWeights(
            (rng.standard_normal((hidden, dim), dtype=np.float32) / np.sqrt(dim)),
            np.zeros(hidden, dtype=np.float32),
            (rng.standard_normal((dim, hidden), dtype=np.float32) / np.sqrt(hidden)),
            np.zeros(dim, dtype=np.float32),
        )
        x = rng.standard_normal((tokens, dim), dtype=np.float32)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            expert_ffn(x, w)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))


@serve.deployment(max_ongoing_requests=256, ray_actor_options={"num_cpus": 0})
class MoEIngress:
    """Embedding, attention, gating and combine; dispatches token batches to experts."""

    def __init__(
        self,
        cfg: MoEConfig,
        state: dict[str, npt.NDArray[np.float32]],
        experts: list[list[DeploymentHandle[Any]]],
        counts: list[list[int]],
        borrow: bool = True,
    ) -> None:
        import ray
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.model = MoEModel(cfg, calibrate_gates=False)  # the state carries the biases
        self.model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        # Grad mode is thread-local, and concurrent requests interleave on one event-loop
        # thread, so a `with no_grad()` in one coroutine can be undone by another's exit.
        # Parameters that never require grad make the mode irrelevant.
        self.model.requires_grad_(False)
        self.handles = experts
        self.counts = np.asarray(counts, dtype=np.int64)
        self.slots = _replica_slots(self.counts)
        self.service: ServiceTime | None = None
        self.borrow = borrow
        self.window = np.zeros((cfg.layers, cfg.experts))
        self.dispatch_stats = {"chunks": 0, "borrowed": 0, "fetched": 0}
        # Borrowing replicas fetch parameters from here; the ingress owns these objects.
        self.weight_refs = [
            [ray.put(self.model.expert_weights(layer, e)) for e in range(cfg.experts)]
            for layer in range(cfg.layers)
        ]
        tags = ("layer", "expert")
        self.m_tokens = metrics.Counter(
            "moe_expert_tokens", "Tokens routed to an expert", tag_keys=tags
        )
        self.m_latency = metrics.Histogram(
            "moe_expert_call_ms",
            "Latency of one layer's call to an expert (all its chunks)",
            boundaries=[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
            tag_keys=tags,
        )
        self.m_replicas = metrics.Gauge(
            "moe_expert_replicas",
            "Replicas the ingress splits an expert's tokens over",
            tag_keys=tags,
        )
        self.m_borrowed = metrics.Counter(
            "moe_expert_borrowed_chunks",
            "Chunks of an expert run on replicas of another expert (per-request borrowing)",
            tag_keys=tags,
        )

    async def _call_expert(self, layer: int, expert: int, x: Any, hosts: list[int]) -> Any:
        """Split the expert's tokens into one chunk per host, call them together, re-join.

        ``hosts[i]`` is the expert whose replicas run chunk ``i``; a host other than
        ``expert`` runs it as a borrowed expert.
        """
        n = x.shape[0]
        chunks = np.array_split(x.numpy(), len(hosts))
        refs = self.weight_refs[layer][expert]
        t0 = time.perf_counter()
        calls = [
            self._send(layer, h, c, None if h == expert else Borrow(expert, [refs]))
            for c, h in zip(chunks, hosts, strict=True)
        ]
        outs = await asyncio.gather(*calls)
        tags = {"layer": str(layer), "expert": str(expert)}
        self.m_latency.observe((time.perf_counter() - t0) * 1e3, tags=tags)
        self.m_tokens.inc(n, tags=tags)
        self.m_replicas.set(float(self.counts[layer, expert]), tags=tags)
        borrowed = sum(h != expert for h in hosts)
        if borrowed:
            self.m_borrowed.inc(borrowed, tags=tags)
        self.dispatch_stats["chunks"] += len(hosts)
        self.dispatch_stats["borrowed"] += borrowed
        self.dispatch_stats["fetched"] += sum(bool(f) for _, f in outs)
        return self.torch.from_numpy(np.concatenate([y for y, _ in outs]))

    async def _send(self, layer: int, host: int, chunk: Any, borrow: Borrow | None) -> Any:
        """Call one replica of ``host`` once one is free, in arrival order.

        WHY: a replica takes one call at a time; when all of a deployment's replicas are
        busy, Serve's router retries with exponential back-off (25 ms doubling to 0.5 s),
        so a chunk can sit idle long after a replica frees, and which waiting chunk wins
        is luck: that is tail latency the plan did not cause. One slot per replica,
        awaited here in FIFO order, hands a freed replica to the oldest chunk at once.
        """
        async with self.slots[layer][host]:
            return await self.handles[layer][host].remote(chunk, self.service, borrow)

    async def __call__(self, tokens: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Forward a [B, T] batch of token ids; returns the final hidden states [B, T, dim]."""
        torch = self.torch
        h = self.model.embed(torch.as_tensor(tokens, dtype=torch.long))
        for layer in range(self.model.cfg.layers):
            h = self.model.attend(layer, h)
            xn, idx, w = self.model.route(layer, h)
            ds = self.model.dispatch(idx, w)
            tokens = np.zeros(self.model.cfg.experts, dtype=np.int64)
            for d in ds:
                tokens[d.expert] = d.rows.numel()
            self.window[layer] += tokens
            split = chunk_hosts if self.borrow else static_hosts
            hosts = split(tokens, self.counts[layer])
            ys = await asyncio.gather(
                *(self._call_expert(layer, d.expert, xn[d.rows], hosts[d.expert]) for d in ds)
            )
            h = self.model.combine(h, ds, list(ys))
        out: npt.NDArray[np.float32] = self.model.finish(h).numpy()
        return out

    def set_counts(self, counts: list[list[int]]) -> None:
        """Adopt the replica counts the re-planner applied (used to split tokens).

        Calls in flight finish on the old slots; new calls queue on the new ones.
        """
        self.counts = np.asarray(counts, dtype=np.int64)
        self.slots = _replica_slots(self.counts)

    def set_service(self, service: ServiceTime | None) -> None:
        """Switch expert calls to calibrated device time (or back to plain compute)."""
        self.service = service

    def set_borrow(self, on: bool) -> None:
        """Turn per-request borrowing (Lina's per-batch side) on or off."""
        self.borrow = on

    def take_window(self) -> list[list[float]]:
        """Actual per-expert token counts since the last call (for phase-2 re-planning)."""
        out = self.window.tolist()
        self.window[:] = 0
        return out

    def take_dispatch_stats(self) -> dict[str, int]:
        """Chunks sent, how many were borrowed and how many fetched parameters, since last call."""
        out = dict(self.dispatch_stats)
        self.dispatch_stats = dict.fromkeys(out, 0)
        return out


def _replica_slots(counts: npt.NDArray[np.int64]) -> list[list[asyncio.Semaphore]]:
    """One admission slot per replica of each (layer, expert) deployment."""
    return [[asyncio.Semaphore(int(c)) for c in row] for row in counts]


def build_app(
    model: MoEModel,
    counts: npt.NDArray[np.int64],
    gpus_per_replica: float = 0.0,
    borrow: bool = True,
) -> Any:
    """Bind the ingress and one deployment per (layer, expert) with ``counts`` replicas.

    ``borrow`` turns on per-request borrowing (``dynamic.py``); off, an expert's tokens are
    split over its own replicas only.
    """
    cfg = model.cfg
    if counts.shape != (cfg.layers, cfg.experts) or counts.min() < 1:
        raise ValueError(f"counts must be [{cfg.layers}, {cfg.experts}] and >= 1")
    opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": gpus_per_replica}
    experts = [
        [
            ExpertReplica.options(  # type: ignore[attr-defined]
                name=expert_name(layer, e),
                num_replicas=int(counts[layer, e]),
                ray_actor_options=opts,
            ).bind(model.expert_weights(layer, e))
            for e in range(cfg.experts)
        ]
        for layer in range(cfg.layers)
    ]
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    ingress = MoEIngress.options(name=INGRESS_NAME)  # type: ignore[attr-defined]
    return ingress.bind(cfg, state, experts, counts.tolist(), borrow)
