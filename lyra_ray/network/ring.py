"""Ring all-reduce over placed jobs: which links a ring loads, and what it gets.

A data-parallel job spread over several servers all-reduces its gradients every step
around a ring of those servers (NCCL builds it topology-aware: the servers of one rack
next to each other, so a ring crossing ``k > 1`` racks uses each of those racks'
spine uplink and downlink once). Each inter-server ring edge carries
``2 (W - 1) / W x gradient bytes`` per step for ``W`` workers, so the ring's step
communication time is that over the ring's bottleneck rate.

Two users: GADGET-style placement (:mod:`lyra_ray.placement.ring`) scores a candidate by the
bottleneck bandwidth its ring would get, given the rings already on each link; and the
trace simulator's :class:`RingCommModel` slows each placed job by its communication
time, with all rings sharing the fabric max-min fairly (each ring one multi-link flow at
one rate, as a ring runs at its slowest edge). Both take GADGET's view that every ring
on a link competes for it all the time, a pessimistic bound for rings that are idle
part of each step.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lyra_ray.model import Assignment, JobId, JobSpec
from lyra_ray.network.comm_profile import gradient_bytes
from lyra_ray.network.fairness import max_min
from lyra_ray.network.topology import Topology


def ring_order(servers: Sequence[str], topo: Topology) -> list[str]:
    """The servers in ring order: rack by rack, then as the topology lists them."""
    return sorted(set(servers), key=lambda s: (topo.rack_of[topo.server(s)], topo.server(s)))


_RINGS: weakref.WeakKeyDictionary[Topology, dict[frozenset[str], dict[int, int]]] = (
    weakref.WeakKeyDictionary()
)
"""Each topology's rings already worked out: placement and the simulator ask for the
same few server sets again and again (paths are fixed, so the answer never changes)."""


def ring_links(servers: Sequence[str], topo: Topology) -> dict[int, int]:
    """Link -> how many ring edges cross it; empty for a ring inside one server.
    The returned mapping is shared: do not modify it."""
    cache = _RINGS.setdefault(topo, {})
    key = frozenset(servers)
    out = cache.get(key)
    if out is None:
        out = {}
        ring = ring_order(servers, topo)
        if len(ring) > 1:
            for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
                for link in topo.path(a, b):
                    out[link] = out.get(link, 0) + 1
        cache[key] = out
    return out


def ring_seconds(workers: int, nbytes: float, rate: float) -> float:
    """Seconds of one ring all-reduce of ``nbytes`` over ``workers`` at ``rate`` B/s."""
    if workers < 2 or nbytes <= 0:
        return 0.0
    return 2.0 * (workers - 1) / workers * nbytes / rate


@dataclass
class RingLoads:
    """How many rings cross each link (GADGET's equal-share view of contention)."""

    topo: Topology
    count: dict[int, int] = field(default_factory=dict)

    def add(self, servers: Sequence[str], sign: int = 1) -> None:
        for link, k in ring_links(servers, self.topo).items():
            self.count[link] = self.count.get(link, 0) + sign * k

    def share(self, link: int, extra: int = 1) -> float:
        """The bandwidth one more ring would get on ``link``."""
        return float(self.topo.capacity[link]) / (self.count.get(link, 0) + extra)

    def bottleneck(self, servers: Sequence[str]) -> float:
        """The bandwidth a new ring over ``servers`` would get at its tightest link."""
        links = ring_links(servers, self.topo)
        return min((self.share(link, k) for link, k in links.items()), default=float("inf"))


class RingCommModel:
    """The simulator's placement-aware throughput: compute rate plus ring all-reduce.

    A job's step time is ``1 / base_rate + ring all-reduce seconds``: ``base_rate`` is
    its throughput from the catalogue (measured consolidated, so it already holds its
    intra-server communication), and the ring term is what spreading over servers adds.
    A job whose nodes are unknown to the topology runs at its base rate.
    """

    def __init__(self, topology: Topology, nbytes: Mapping[str, float] | None = None) -> None:
        self.topology = topology
        self.nbytes = nbytes
        self._last: tuple[tuple[tuple[JobId, tuple[str, ...]], ...], list[float]] | None = None
        """The rings of the last call and their rates: most calls re-rate the same rings."""

    def rates(self, runs: Mapping[JobId, tuple[JobSpec, Assignment, float]]) -> dict[JobId, float]:
        out = {j: base for j, (_, _, base) in runs.items()}
        index = self.topology.index
        key = tuple(
            (j, servers)
            for j, (_, a, base) in runs.items()
            if base > 0
            and len(servers := tuple(n for n, _ in a.nodes)) > 1
            and all(s in index for s in servers)
        )
        if not key:
            return out
        if self._last is not None and self._last[0] == key:
            bw = self._last[1]
        else:
            bw = self._share([ring_links(servers, self.topology) for _, servers in key])
            self._last = (key, bw)
        for (j, _), rate in zip(key, bw, strict=True):
            spec, a, base = runs[j]
            comm = ring_seconds(a.workers, gradient_bytes(spec, self.nbytes), rate)
            out[j] = 1.0 / (1.0 / base + comm)
        return out

    def _share(self, rings: list[dict[int, int]]) -> list[float]:
        """Max-min rates of whole rings over the links some ring uses."""
        used = sorted({link for ring in rings for link in ring})
        row = {link: i for i, link in enumerate(used)}
        incidence = np.zeros((len(used), len(rings)))
        for col, ring in enumerate(rings):
            for link, k in ring.items():
                incidence[row[link], col] = k
        return [float(x) for x in max_min(incidence, self.topology.capacity[used])]
