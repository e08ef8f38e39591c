"""The ideal speed-up of one replica plan over another, from the gate's actual counts.

WHY: a measured p95 ratio mixes the plan's quality with everything else (Serve's router,
queueing, the host). The ideal ratio is what the plans alone allow: with every replica a
device working in parallel, a window of traffic finishes when its busiest replica does, so
the ratio of the busiest replica's work under the two plans bounds the throughput gain (and,
under load, the tail latency gain). Reporting it beside the measured ratio tells a weak
workload (little skew to exploit) apart from a weak system.

Two versions:
- ``tokens``: a replica carries ``tokens[e] / replicas[e]`` (the planner's own objective).
- ``service``: a replica's calibrated device time over the window, ``requests * fixed_s +
  per_token_s * tokens[e] / replicas[e]``: each request calls each replica of each expert it
  routes to once (the ingress splits an expert's tokens over all its replicas), so the fixed
  per-call cost is the same under both plans and dilutes the gain.

A third, per request (``request_ideal``): a request's latency on idle devices is, layer after
layer, its slowest chunk. Traffic whose mix varies request to request (the benchmark's
Dirichlet mixes) sends some requests mostly to experts that Lina gave one replica, because
their *average* share is small; those requests set the tail, so the p95 gain can be well
below the window's ratio even though the throughput gain is not.

``request_ideal`` also reports the plan with per-request borrowing (``dynamic.py``): each
request's chunks follow its own counts, which removes that tail in the ideal.

A fourth, ``roofline`` (when ``ideal_report`` gets an ``expert`` cost, ``expert_time.py``): a
call's device time is the expert-time model of the tokens it carries (a roofline with a
launch floor, fitted to an H200) instead of ``fixed + per_token * tokens``. Below the
shape's flat-region token count a call costs the same whatever its tokens, so splitting an
expert's tokens over more replicas buys nothing there.

Pure numpy: no Ray, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.packing import apportion

Loads = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Cost = Callable[[Loads], Loads]
"""Device seconds of one call for each token count (``expert_time.ExpertCost``)."""


def replica_work(
    tokens: Loads,
    replicas: Ints,
    requests: int = 0,
    fixed_s: float = 0.0,
    per_token_s: float = 1.0,
) -> Loads:
    """Work per replica of each expert [L, E] (tokens, or seconds with a service time)."""
    if tokens.shape != replicas.shape or replicas.min() < 1:
        raise ValueError("tokens and replicas must have the same shape, replicas >= 1")
    called = tokens > 0  # an expert nobody routed to is never called
    out: Loads = per_token_s * tokens / replicas + np.where(called, requests * fixed_s, 0.0)
    return out


def ideal_ratio(
    tokens: Loads,
    base: Ints,
    plan: Ints,
    requests: int = 0,
    fixed_s: float = 0.0,
    per_token_s: float = 1.0,
) -> dict[str, Any]:
    """Busiest-replica work under ``base`` divided by that under ``plan``: per layer and overall.

    ``overall`` takes the busiest replica over all layers (every replica is its own device,
    so all layers' replicas work at once under load).
    """
    wb = replica_work(tokens, base, requests, fixed_s, per_token_s).max(1)
    wp = replica_work(tokens, plan, requests, fixed_s, per_token_s).max(1)
    return {
        "per_layer": (wb / wp).tolist(),
        "overall": float(wb.max() / wp.max()),
        "busiest_base": wb.tolist(),
        "busiest_plan": wp.tolist(),
    }


def roofline_work(per_request: Loads, replicas: Ints, cost: Cost) -> Loads:
    """Device seconds per replica of each expert [L, E] over a window of requests [R, L, E]:
    each request calls every replica of each expert it routes to with an equal share of that
    expert's tokens, and a call takes ``cost`` of its tokens."""
    if per_request.shape[1:] != replicas.shape or replicas.min() < 1:
        raise ValueError("per_request must be [requests, *replicas.shape], replicas >= 1")
    out: Loads = cost(per_request / replicas[None]).sum(0)
    return out


def roofline_ratio(per_request: Loads, base: Ints, plan: Ints, cost: Cost) -> dict[str, Any]:
    """``ideal_ratio`` with each call's time from ``cost`` (the expert-time model)."""
    wb = roofline_work(per_request, base, cost).max(1)
    wp = roofline_work(per_request, plan, cost).max(1)
    return {
        "per_layer": (wb / wp).tolist(),
        "overall": float(wb.max() / wp.max()),
        "busiest_base": wb.tolist(),
        "busiest_plan": wp.tolist(),
    }


def request_times(
    per_request: Loads,
    replicas: Ints,
    fixed_s: float = 0.0,
    per_token_s: float = 1.0,
    borrow: bool = False,
    cost: Cost | None = None,
) -> Loads:
    """Unloaded latency of each request [R] from its counts [R, L, E]: sum over layers of the
    slowest chunk (the ingress splits ``n`` tokens over ``replicas`` chunks, the largest has
    ``ceil(n / replicas)``; an expert with no tokens is not called). With ``borrow``, the
    chunks per expert are the request's own (as ``dynamic.request_chunks``), and parameters
    are taken as already held (no fetch time). With ``cost``, a chunk takes ``cost(chunk)``
    instead of ``fixed_s + per_token_s * chunk``."""
    parts = np.broadcast_to(replicas[None], per_request.shape).astype(np.float64)
    if borrow:
        counts = per_request.astype(np.int64)
        parts = np.stack(  # all requests of a layer in one vectorised divisor method
            [
                apportion(per_request[:, i], int(replicas[i].sum()), (c > 0).astype(np.int64), c)
                for i, c in enumerate(counts.transpose(1, 0, 2))
            ],
            axis=1,
        ).astype(np.float64)
    chunk = np.ceil(per_request / np.maximum(parts, 1.0))
    busy = fixed_s + per_token_s * chunk if cost is None else cost(chunk)
    t = np.where(per_request > 0, busy, 0.0)
    out: Loads = t.max(2).sum(1)
    return out


def request_ideal(
    per_request: Loads,
    base: Ints,
    plan: Ints,
    fixed_s: float = 0.0,
    per_token_s: float = 1.0,
    cost: Cost | None = None,
) -> dict[str, Any]:
    """p50 / p95 / mean of the unloaded per-request latency: base over plan, and both."""
    tb = request_times(per_request, base, fixed_s, per_token_s, cost=cost)
    tp = request_times(per_request, plan, fixed_s, per_token_s, cost=cost)
    tw = request_times(per_request, plan, fixed_s, per_token_s, borrow=True, cost=cost)
    out: dict[str, Any] = {"borrow": {}}
    for q in (50, 95):
        b, p, w = (float(np.percentile(t, q)) for t in (tb, tp, tw))
        out[f"p{q}"], out[f"p{q}_base"], out[f"p{q}_plan"] = b / p, b, p
        out["borrow"][f"p{q}"], out["borrow"][f"p{q}_plan"] = b / w, w
    out["mean"] = float(tb.mean() / tp.mean())
    out["borrow"]["mean"] = float(tb.mean() / tw.mean())
    return out


def ideal_report(
    tokens: Loads,
    base: Ints,
    plan: Ints,
    requests: int,
    service: tuple[float, float] | None = None,
    per_request: Loads | None = None,
    expert: Cost | None = None,
) -> dict[str, Any]:
    """The ideal ratios for one measured window (``service`` = fixed, per-token seconds).

    ``per_request`` [R, L, E] adds the unloaded per-request version (in service seconds when
    ``service`` is given, else in tokens). ``expert`` (a call's seconds from its tokens,
    e.g. ``ExpertCost(4096, 14336, "h200")``) adds ``roofline``: the window and unloaded
    per-request ratios under that model; without ``per_request`` the window's tokens are
    taken as spread evenly over its requests.
    """
    out: dict[str, Any] = {
        "window_tokens": tokens.tolist(),
        "window_requests": requests,
        "tokens": ideal_ratio(tokens, base, plan),
    }
    if service is not None:
        out["service"] = ideal_ratio(tokens, base, plan, requests, *service)
    if per_request is not None:
        out["unloaded_request"] = request_ideal(per_request, base, plan, *(service or (0.0, 1.0)))
    if expert is not None:
        reqs = (
            per_request
            if per_request is not None
            else np.broadcast_to(tokens / max(1, requests), (max(1, requests), *tokens.shape))
        )
        out["roofline"] = {
            "window": roofline_ratio(reqs, base, plan, expert),
            "unloaded_request": request_ideal(reqs, base, plan, cost=expert),
        }
    return out
