"""One arm of the MoE service benchmark: open-loop requests through rate phases, and the
ideal ratios of the requests' own routes.

WHY explicit tokens: both arms must serve the very same requests, and the ideal ratio
(``moe_serving/bottleneck.py``) needs each request's per-expert token counts. The benchmark
samples the requests here (seeded, a Dirichlet topic mix per request, as the service's
own sampler does), computes their routes with the same seeded model the ingress builds,
and sends each request's tokens in its body.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lyra_ray.serving.load import check_loopback_url


@dataclass(frozen=True)
class Phase:
    name: str
    rps: float
    seconds: float


def sample_requests(
    knobs: dict[str, Any], n: int, batch: int, seq: int, seed: int
) -> tuple[list[list[list[int]]], npt.NDArray[np.float64]]:
    """``n`` requests' tokens, and their per-expert token counts [n, layers, experts], from
    the same model the ingress builds (``hf_arch.arch_spec`` of the knobs, the routers
    calibrated to the same ``target_load``, one torch thread as there)."""
    import torch

    from lyra_ray.moe_serving.hf_arch import arch_spec
    from lyra_ray.moe_serving.hf_moe import HFMoE
    from lyra_ray.moe_serving.workload import sample_batch

    torch.set_num_threads(1)
    model = HFMoE(arch_spec(knobs))
    target = np.asarray(knobs["target_load"], dtype=np.float64)
    model.calibrate(target / target.sum(1, keepdims=True))
    rng = np.random.default_rng(seed)
    bodies, counts = [], np.zeros((n, model.layers, model.experts))
    for i in range(n):
        mix = rng.dirichlet(np.full(model.topics, 0.5))
        tokens = sample_batch(model, rng, batch, seq, mix)
        routes = model.routes(tokens.numpy())  # [L, tokens, k]
        for layer in range(model.layers):
            counts[i, layer] = np.bincount(routes[layer].ravel(), minlength=model.experts)
        bodies.append(tokens.tolist())
    return bodies, counts


@dataclass
class Sent:
    phase: str
    index: int
    latency_ms: float | None
    failure: str | None


async def _send(session: Any, url: str, body: list[list[int]], sent: Sent, start: float) -> None:
    import aiohttp

    try:
        async with session.post(url, json={"tokens": body}) as resp:
            await resp.read()
            if resp.status == 200:
                sent.latency_ms = 1000.0 * (time.monotonic() - start)
            else:
                sent.failure = f"http_{resp.status}"
    except TimeoutError:
        sent.failure = "timeout"
    except aiohttp.ClientError as e:
        sent.failure = type(e).__name__


async def _drive(
    url: str, bodies: list[list[list[int]]], phases: list[Phase], seed: int
) -> list[Sent]:
    """Poisson arrivals at each phase's rate; a latency counts from the scheduled time."""
    import aiohttp

    rng = np.random.default_rng(seed)
    out: list[Sent] = []
    tasks = []
    timeout = aiohttp.ClientTimeout(total=120.0)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        loop_start = time.monotonic()
        at = 0.0
        for ph in phases:
            end = at + ph.seconds
            while True:
                at += float(rng.exponential(1.0 / ph.rps))
                if at >= end:
                    at = end
                    break
                delay = loop_start + at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                i = len(out)
                s = Sent(ph.name, i, None, None)
                out.append(s)
                body = bodies[i % len(bodies)]
                tasks.append(asyncio.create_task(_send(session, url, body, s, loop_start + at)))
        await asyncio.gather(*tasks)
    return out


async def _saturate(
    url: str, bodies: list[list[list[int]]], clients: int, seconds: float, first: int
) -> list[Sent]:
    """Closed loop: ``clients`` senders, each sending its next request as soon as the last
    one answered, for ``seconds``: the requests the service completes per second."""
    import aiohttp

    out: list[Sent] = []
    timeout = aiohttp.ClientTimeout(total=120.0)
    end = time.monotonic() + seconds

    async def client(session: Any) -> None:
        while time.monotonic() < end:
            i = first + len(out)
            s = Sent("saturated", i, None, None)
            out.append(s)
            await _send(session, url, bodies[i % len(bodies)], s, time.monotonic())

    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return out


def saturate(
    url: str, bodies: list[list[list[int]]], clients: int, seconds: float, first: int
) -> list[Sent]:
    """``_saturate`` on a loopback URL."""
    return asyncio.run(_saturate(check_loopback_url(url), bodies, clients, seconds, first))


def drive(url: str, bodies: list[list[list[int]]], phases: list[Phase], seed: int) -> list[Sent]:
    """Send the requests (``bodies`` in order, cycled) through ``phases``; loopback only."""
    return asyncio.run(_drive(check_loopback_url(url), bodies, phases, seed))


def latency_report(sent: list[Sent]) -> dict[str, Any]:
    """p50/p95 and failures, overall and per phase."""

    def stats(rows: list[Sent]) -> dict[str, Any]:
        lat = np.array([s.latency_ms for s in rows if s.latency_ms is not None])
        fails: dict[str, int] = {}
        for s in rows:
            if s.failure:
                fails[s.failure] = fails.get(s.failure, 0) + 1
        return {
            "requests": len(rows),
            "failures": fails,
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
            "p95_ms": float(np.percentile(lat, 95)) if lat.size else None,
        }

    phases = list(dict.fromkeys(s.phase for s in sent))
    timed = [s for s in sent if s.phase != "saturated"]
    return {"all": stats(timed), **{p: stats([s for s in sent if s.phase == p]) for p in phases}}
