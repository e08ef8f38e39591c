"""How many nodes of each type lyra asks the autoscaler to keep: a pure function of the
scheduler's snapshot, the node types, the caps and the spend so far.

The request is a *level*, recomputed from scratch every cycle, never a delta: per node
type, the nodes that hold work now (a run, a service's replicas, a loan) plus the nodes
the waiting jobs need beyond the GPUs free on those. Ray's autoscaler reads it as a
floor on the cluster's capacity (``request_resources``: bundles fitted against what the
nodes offer, not what is free), so

- a burst of waiting jobs raises the level and the autoscaler starts nodes;
- the jobs are placed on them, the nodes are busy, the level holds them;
- once the jobs end the level falls, lyra stops asking for those nodes, and the
  autoscaler removes them after its idle timeout;
- a busy node is always in the level: an inference server that serves or is lent
  is never asked away (the autoscaler also keeps any node that is not idle).

Which type a waiting job counts on (a job may run on several): one whose free GPUs it
fits first (no node is bought while GPUs it could use sit idle), else the type that
gives it the most steps per dollar (its throughput there over the GPU-hour price, as
Gavel's cost policies rank types), whose caps still allow the nodes: the type's
``max_workers``, the cluster's ``max_workers``, the spend rate (``max_usd_per_hour``)
and the budget left (``budget_usd``, ``budget_node_hours``: a new node only while the
budget covers ``commit_hours`` of it). A job no type can take is reported with the cap
that stopped it. Jobs are taken in arrival order (ties by id): the same snapshot always
gives the same request.

Inference servers: when serving needs more servers than the pool has
(``snap.serving_demand``), the cheapest inference type within its caps is asked for
the difference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.autoscale.settings import AutoscaleSettings
from lyra_ray.autoscale.spend import Spend
from lyra_ray.model import ClusterSnapshot, JobView, Node
from lyra_ray.model.node_types import NodeType, node_type_of


@dataclass(frozen=True)
class TypeRequest:
    """One node type's line of the request."""

    node_type: str
    gpu_type: str
    pool: str
    have: int
    """Nodes of the type up now."""
    busy: int
    """Of which hold work: a run's GPUs, a service's replicas, a loan."""
    nodes: int
    """The level asked for."""
    wanted: int
    """The level the waiting work would need without the caps."""
    bound: str | None
    """The cap that held :attr:`nodes` below :attr:`wanted`, if one did."""
    jobs: tuple[str, ...] = ()
    """The waiting jobs counted on this type."""

    def to_json(self, t: NodeType) -> dict[str, Any]:
        return {
            "node_type": self.node_type,
            "gpu_type": self.gpu_type,
            "pool": self.pool,
            "gpus_per_node": t.gpus,
            "min_workers": t.min_workers,
            "max_workers": t.max_workers,
            "usd_per_hour": t.usd_per_hour,
            "price_source": t.price_source,
            "have": self.have,
            "busy": self.busy,
            "requested": self.nodes,
            "wanted": self.wanted,
            "bound": self.bound,
            "waiting_jobs": list(self.jobs),
        }


@dataclass(frozen=True)
class ScaleRequest:
    types: tuple[TypeRequest, ...] = ()
    unserved: Mapping[str, str] = field(default_factory=dict)
    """Waiting jobs for which no node type could be added, and the cap that stopped it."""

    def level(self) -> dict[str, int]:
        return {r.node_type: r.nodes for r in self.types}

    def bundles(self, types: Iterable[NodeType]) -> list[dict[str, float]]:
        """One whole-node bundle per node asked for, type by type (the call's argument)."""
        by_name = {t.name: t for t in types}
        out: list[dict[str, float]] = []
        for r in self.types:
            out += [by_name[r.node_type].bundle() for _ in range(r.nodes)]
        return out

    def selectors(self, types: Iterable[NodeType]) -> list[dict[str, str]]:
        """Each bundle's label selector (Ray's autoscaler v2 reads them; v1 the resources)."""
        by_name = {t.name: t for t in types}
        return [dict(by_name[r.node_type].labels) for r in self.types for _ in range(r.nodes)]


@dataclass
class _Line:
    """One type's running tally while the jobs are counted."""

    t: NodeType
    have: int = 0
    busy: int = 0
    free_on_busy: int = 0
    demand: int = 0
    extra_servers: int = 0
    wanted: int = 0
    bound: str | None = None
    jobs: list[str] = field(default_factory=list)

    def level(self, demand: int | None = None, servers: int | None = None) -> int:
        d = self.demand if demand is None else demand
        s = self.extra_servers if servers is None else servers
        return self.busy + s + math.ceil(max(0, d - self.free_on_busy) / self.t.gpus)

    def new(self, level: int) -> int:
        return max(0, level - self.have)


class _Caps:
    """The caps, checked on the levels as they would be after one more job."""

    def __init__(self, s: AutoscaleSettings, spend: Spend, lines: dict[str, _Line]) -> None:
        self.s, self.lines = s, lines
        self.usd_left = None if s.budget_usd is None else s.budget_usd - spend.usd(s.node_types)
        self.hours_left = (
            None if s.budget_node_hours is None else s.budget_node_hours - spend.node_hours()
        )

    def refuse(self, line: _Line, level: int) -> str | None:
        """Why ``line`` may not go to ``level`` (None: it may)."""
        t = line.t
        if level > t.max_workers:
            return f"max_workers ({t.max_workers} {t.name} nodes)"
        levels = {k: x.level() for k, x in self.lines.items()}
        levels[t.name] = level
        total = sum(max(v, self.lines[k].t.min_workers) for k, v in levels.items())
        if total > self.s.cluster_max_workers:
            return f"the cluster's max_workers ({self.s.cluster_max_workers})"
        if self.s.max_usd_per_hour is not None:
            rate = sum(
                max(0, v - self.lines[k].t.min_workers) * self.lines[k].t.usd_per_hour
                for k, v in levels.items()
            )
            if rate > self.s.max_usd_per_hour + 1e-9:
                return f"max_usd_per_hour ({self.s.max_usd_per_hour:g})"
        new = {k: self.lines[k].new(v) for k, v in levels.items()}
        if new[t.name] > line.new(line.level()):  # this step buys a node: the budgets
            h = self.s.commit_hours
            if self.usd_left is not None:
                cost = sum(n * self.lines[k].t.usd_per_hour * h for k, n in new.items())
                if cost > self.usd_left + 1e-9:
                    return f"budget_usd (${max(0.0, self.usd_left):,.2f} left)"
            if self.hours_left is not None and sum(new.values()) * h > self.hours_left + 1e-9:
                return f"budget_node_hours ({max(0.0, self.hours_left):.2f} left)"
        return None


def _tally(
    snap: ClusterSnapshot, types: tuple[NodeType, ...], serving: frozenset[str]
) -> dict[str, _Line]:
    lines = {t.name: _Line(t) for t in types}
    used: dict[str, int] = {}
    for j in snap.active_jobs:
        if j.current is not None:
            for nid, gpus in j.current.nodes:
                used[nid] = used.get(nid, 0) + gpus
    for n in snap.nodes:
        t = node_type_of(types, n.gpu_type, n.pool, n.num_gpus)
        if t is None:
            continue  # a node no type of the config describes: not the autoscaler's
        line = lines[t.name]
        line.have += 1
        u = min(n.num_gpus, used.get(n.id, 0))
        if u > 0 or n.id in snap.lent_nodes or n.id in serving:
            line.busy += 1
            if n.pool == "training":
                line.free_on_busy += n.num_gpus - u
    return lines


def _steps_per_usd(snap: ClusterSnapshot, j: JobView, t: NodeType) -> float:
    need = j.spec.min_workers
    return snap.throughput(j, t.gpu_type, need) / (need * t.usd_per_gpu_hour())


def _count_job(
    j: JobView, snap: ClusterSnapshot, lines: dict[str, _Line], caps: _Caps
) -> str | None:
    """Count ``j`` on a type; None, or why no type could take it."""
    need = j.spec.min_workers
    usable = [
        x
        for x in lines.values()
        if x.t.pool == "training"
        and need <= x.t.gpus * x.t.max_workers
        and snap.throughput(j, x.t.gpu_type, need) > 0
    ]
    if not usable:
        return None
    free = [x for x in usable if x.level(x.demand + need) == x.level()]
    ranked = sorted(usable, key=lambda x: (-_steps_per_usd(snap, j, x.t), x.t.name))
    for x in free or ranked:
        level = x.level(x.demand + need)
        x.wanted = max(x.wanted, level)
        why = None if x in free else caps.refuse(x, level)
        if why is None:
            x.demand += need
            x.jobs.append(j.id)
            return None
        x.bound = x.bound or why
    best = ranked[0]
    return f"{best.t.name}: {best.bound}"


def _count_servers(snap: ClusterSnapshot, lines: dict[str, _Line], caps: _Caps) -> None:
    infer = sorted(
        (x for x in lines.values() if x.t.pool == "inference"),
        key=lambda x: (x.t.usd_per_hour, x.t.name),
    )
    have = sum(1 for n in snap.nodes if n.pool == "inference")
    for _ in range(max(0, snap.serving_demand - have)):
        for x in infer:
            level = x.level(servers=x.extra_servers + 1)
            x.wanted = max(x.wanted, level)
            why = caps.refuse(x, level)
            if why is None:
                x.extra_servers += 1
                break
            x.bound = x.bound or why
        else:
            return


def scale_request(
    snap: ClusterSnapshot,
    settings: AutoscaleSettings,
    spend: Spend,
    serving: frozenset[str] = frozenset(),
) -> ScaleRequest:
    """The request for this snapshot. ``serving``: inference nodes whose GPUs hold a
    service's replicas (the serving pool knows; the snapshot does not)."""
    types = settings.node_types
    if not settings.enabled or not types:
        return ScaleRequest()
    lines = _tally(snap, types, serving)
    caps = _Caps(settings, spend, lines)
    unserved: dict[str, str] = {}
    waiting = sorted(
        (j for j in snap.active_jobs if j.current is None), key=lambda j: (j.arrival_s, j.id)
    )
    for j in waiting:
        why = _count_job(j, snap, lines, caps)
        if why is not None:
            unserved[j.id] = why
    _count_servers(snap, lines, caps)
    out = []
    for x in lines.values():
        level = x.level()
        wanted = max(x.wanted, level)
        out.append(
            TypeRequest(
                node_type=x.t.name,
                gpu_type=x.t.gpu_type,
                pool=x.t.pool,
                have=x.have,
                busy=x.busy,
                nodes=level,
                wanted=wanted,
                bound=x.bound if wanted > level else None,
                jobs=tuple(x.jobs),
            )
        )
    return ScaleRequest(tuple(out), unserved)


def node_counts(nodes: Iterable[Node], types: tuple[NodeType, ...]) -> dict[str, int]:
    """Nodes up per node type (what the spend accrues over)."""
    out: dict[str, int] = {}
    for n in nodes:
        t = node_type_of(types, n.gpu_type, n.pool, n.num_gpus)
        if t is not None:
            out[t.name] = out.get(t.name, 0) + 1
    return out
