"""Ring-aware placement (GADGET, INFOCOM'22): put a ring all-reduce job's workers
where its ring's bottleneck bandwidth is highest.

Consolidation minimises the number of servers a gang spans but is blind to where they
are: two servers in different racks behind an oversubscribed spine, or servers whose
NICs already carry other jobs' rings, make a slow ring. GADGET embeds each job's ring
greedily into the topology so that its bottleneck link, shared with the rings already
there, leaves it the most bandwidth.

This placer keeps everything the consolidating placer decides (what runs stays where it
runs, elastic growth, space-sharing pairs, preferred servers) and re-embeds only the
gangs it has just placed over more than one server. For each, biggest first, it finds
the placement with the *highest* ring bottleneck exactly, under GADGET's equal-share
view (:class:`~lyra_ray.network.ring.RingLoads`): candidate bottlenecks are the shares
of the servers' NICs and of the racks' spine links; for each candidate ``b``, from the
highest down, the servers whose NIC share is ``>= b`` either hold the gang within one
rack (no spine link used) or, in racks whose spine share is ``>= b``, across racks. The
first ``b`` that fits is the maximum. At that ``b`` one rack is preferred (fewest
servers, largest free first); across racks, the racks with the most free GPUs go first.
One server that fits the whole gang beats any ring. A gang moves only
if that strictly beats the consolidating choice.
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray.model import Assignment, ClusterSnapshot, JobId, NodeId
from lyra_ray.network.ring import RingLoads
from lyra_ray.network.topology import Topology
from lyra_ray.placement.placer import ConsolidatingPlacer, usable_capacity

Choice = tuple[float, int, list[tuple[NodeId, int]]]
"""(ring bottleneck bandwidth, -servers used, nodes)."""


def _take(need: int, order: list[NodeId], free: Mapping[NodeId, int]) -> list[tuple[NodeId, int]]:
    out = []
    for n in order:
        if need <= 0:
            break
        g = min(free[n], need)
        out.append((n, g))
        need -= g
    return out


def embed(need: int, free: Mapping[NodeId, int], loads: RingLoads) -> Choice | None:
    """The best placement of a ``need``-GPU ring over ``free`` GPUs (nodes in the
    topology, one GPU type), or ``None`` if they do not hold it."""
    topo = loads.topo
    cands = {n: f for n, f in free.items() if f > 0 and n in topo.index}
    if sum(cands.values()) < need:
        return None
    single = [n for n, f in cands.items() if f >= need]
    if single:
        best = min(single, key=lambda n: (cands[n], n))
        return (float("inf"), -1, [(best, need)])
    nic = {
        n: min(loads.share(topo.nic_up(topo.server(n))), loads.share(topo.nic_down(topo.server(n))))
        for n in cands
    }
    rack = {n: topo.rack_of[topo.server(n)] for n in cands}
    spine = {
        r: min(loads.share(topo.rack_up(r)), loads.share(topo.rack_down(r)))
        for r in set(rack.values())
    }
    for b in sorted(set(nic.values()) | set(spine.values()), reverse=True):
        by_rack: dict[int, list[NodeId]] = {}
        for n in sorted(cands, key=lambda n: (-cands[n], -nic[n], n)):
            if nic[n] >= b:
                by_rack.setdefault(rack[n], []).append(n)
        whole = [r for r, ns in by_rack.items() if sum(cands[n] for n in ns) >= need]
        if whole:
            picks = [_take(need, by_rack[r], cands) for r in whole]
            nodes = min(picks, key=lambda p: (len(p), p))
            return (min(nic[n] for n, _ in nodes), -len(nodes), nodes)
        ok = [r for r in by_rack if spine[r] >= b]
        if sum(cands[n] for r in ok for n in by_rack[r]) >= need:
            ok.sort(key=lambda r: (-sum(cands[n] for n in by_rack[r]), r))
            nodes = _take(need, [n for r in ok for n in by_rack[r]], cands)
            used = {rack[n] for n, _ in nodes}
            bottleneck = min(min(nic[n] for n, _ in nodes), min(spine[r] for r in used))
            return (bottleneck, -len(nodes), nodes)
    return None


class RingPlacer:
    """Consolidating placement with each newly placed multi-server gang re-embedded
    for its ring's bottleneck bandwidth (see the module docstring)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.base = ConsolidatingPlacer()
        self.moved = 0
        """Gangs placed differently from consolidation so far (a report, not state)."""

    def place(
        self,
        desired: Mapping[JobId, Assignment],
        snap: ClusterSnapshot,
        previous: Mapping[JobId, Assignment],
        preferred: Mapping[JobId, tuple[NodeId, ...]] | None = None,
    ) -> dict[JobId, Assignment]:
        placed = self.base.place(desired, snap, previous, preferred)
        preferred = preferred or {}
        topo = self.topology
        fresh = sorted(
            (
                j
                for j, a in placed.items()
                if len(a.nodes) > 1
                and a.partner is None
                and j not in preferred
                and (previous.get(j) is None or previous[j].nodes != a.nodes)
                and all(n in topo.index for n, _ in a.nodes)
            ),
            key=lambda j: (-placed[j].workers, j),
        )
        if not fresh:
            return placed
        free = usable_capacity(snap)
        node_type = {n.id: n.gpu_type for n in snap.nodes}
        loads = RingLoads(topo)
        for j, a in placed.items():
            p = a.partner
            if p is not None and p in placed and (placed[p].workers, p) > (a.workers, j):
                continue  # a rider shares its partner's GPUs
            for n, g in a.nodes:
                free[n] -= g
            if j not in fresh:
                loads.add([n for n, _ in a.nodes])
        by_type: dict[str, list[NodeId]] = {}
        for n in free:
            by_type.setdefault(node_type[n], []).append(n)
        for j in fresh:
            a = placed[j]
            for n, g in a.nodes:
                free[n] += g
            current = [n for n, _ in a.nodes]
            now: Choice = (loads.bottleneck(current), -len(current), list(a.nodes))
            pool = {n: free[n] for n in by_type.get(a.gpu_type, ()) if free[n] > 0}
            best = embed(a.workers, pool, loads)
            choice = now if best is None or best[:2] <= now[:2] else best
            if choice is not now:
                self.moved += 1
                placed[j] = Assignment(a.gpu_type, a.workers, tuple(sorted(choice[2])), a.partner)
            for n, g in choice[2]:
                free[n] -= g
            loads.add([n for n, _ in choice[2]])
        return placed


def make_placer(name: str, topology: Topology | None) -> ConsolidatingPlacer | RingPlacer:
    """A placer by configuration name: ``consolidate`` (the default) or ``ring``."""
    if name == "consolidate":
        return ConsolidatingPlacer()
    if name == "ring":
        if topology is None:
            raise ValueError("placer: 'ring' needs a network topology to place rings in")
        return RingPlacer(topology)
    raise ValueError(f"placer: unknown placer {name!r}; known: {', '.join(PLACERS)}")


PLACERS = ("consolidate", "ring")
