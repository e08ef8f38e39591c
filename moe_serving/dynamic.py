"""Lina's per-batch scheduling: which replica runs each chunk of one request's experts.

WHY: the replica counts (``planner.py``) fit a window's *average* popularity, but every
request has its own mix. A request that sends most of its tokens to an expert with one
replica waits on that replica while the replicas of experts it barely uses sit idle; such
requests set the tail (``bottleneck.py``). Lina does not stop at per-window counts: per
batch and per layer, once the gate has routed the tokens, it re-allocates devices to the
experts this batch actually uses, replicating a popular expert onto devices whose own
expert the batch hardly needs (those devices fetch the expert's parameters first).

Here, per request and layer: the request's own counts get the layer's whole replica budget
by the divisor method (an expert the request does not use gets none, an expert cannot get
more chunks than tokens). An expert keeps its chunks on its own replicas up to their count;
chunks beyond that are *borrowed*: they go to replicas of experts the request leaves idle,
the idlest lender first. Every request still makes at most ``budget`` calls per layer, as
under the static split, so the devices' total work is unchanged; only its spread is.

Pure numpy: no Ray, no clock.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.packing import apportion

Ints = npt.NDArray[np.int64]


def request_chunks(tokens: Ints, budget: int) -> Ints:
    """Chunks per expert [E] for one request-layer: the planner's divisor method
    (``packing.apportion``) over the request's own counts.

    Experts with no tokens get 0; every other expert gets >= 1 and at most its token count;
    the total is ``budget`` unless there are fewer tokens than that.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 1 or np.any(tokens < 0):
        raise ValueError(f"tokens must be a 1-D array of counts >= 0, got {tokens!r}")
    floor = (tokens > 0).astype(np.int64)
    if floor.sum() > budget:
        raise ValueError(f"budget ({budget}) is below the experts in use ({floor.sum()})")
    chunks: Ints = apportion(tokens[None].astype(np.float64), budget, floor[None], tokens[None])[0]
    return chunks


def chunk_hosts(tokens: Ints, home: Ints) -> list[list[int]]:
    """For each expert, the home expert of the replica set that runs each of its chunks.

    ``home`` [E] is the layer's replica count per expert (the window plan). Entry ``e`` lists
    ``e`` once per own chunk, then one lender per borrowed chunk. A lender is an expert with
    replicas this request leaves idle; lenders whose own tokens per replica are fewest go
    first, so borrowed chunks land where this request adds least.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    home = np.asarray(home, dtype=np.int64)
    if home.shape != tokens.shape or home.min() < 1:
        raise ValueError(f"home must be [{tokens.size}] with every count >= 1, got {home!r}")
    want = request_chunks(tokens, int(home.sum()))
    own = np.minimum(want, home)
    idle = home - own
    order = np.argsort(tokens / home, kind="stable")
    lenders = [int(f) for f in order for _ in range(int(idle[f]))]
    hosts: list[list[int]] = []
    for e in range(tokens.size):
        borrowed = int(want[e] - own[e])
        hosts.append([e] * int(own[e]) + lenders[:borrowed])
        del lenders[:borrowed]
    return hosts


def static_hosts(tokens: Ints, home: Ints) -> list[list[int]]:
    """The split without borrowing: an expert's tokens over its own replicas only."""
    tokens = np.asarray(tokens, dtype=np.int64)
    home = np.asarray(home, dtype=np.int64)
    return [[e] * int(min(home[e], tokens[e])) for e in range(tokens.size)]
