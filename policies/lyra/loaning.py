"""Capacity loaning: how many inference servers to lend, and which to take back.

The inference pool is sized for its diurnal peak, so most of the day many of its servers
idle. Lyra lends every server that serving does not need right now and, when demand
rises, reclaims lent servers. Which ones matters: a server whose jobs also run elsewhere
(above their minimum) costs a scale-in; a server that holds a whole job costs a
preemption. ``reclaim="knapsack"`` uses Lyra's dependent-value greedy
(:mod:`lyra_ray.placement.reclaim`); ``"naive"`` (the paper's *Basic*) takes servers by id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from lyra_ray.model import ClusterSnapshot, JobId, JobView, NodeId
from lyra_ray.placement.reclaim import JobFootprint, ReclaimPlan, naive_reclaim, plan_reclaim

ReclaimMode = Literal["knapsack", "naive"]


@dataclass(frozen=True, slots=True)
class LoanDecision:
    lend: frozenset[NodeId]
    """Inference nodes on loan after this step."""
    reclaimed: tuple[NodeId, ...] = ()
    plan: ReclaimPlan | None = None
    workers_cap: dict[JobId, int] = field(default_factory=dict)
    """Jobs hit by a reclaim: the most workers each may keep (0 = preempted)."""


def footprints(snap: ClusterSnapshot) -> list[JobFootprint]:
    """Where every running job sits now (all its nodes, lent or not)."""
    out: list[JobFootprint] = []
    for j in snap.active_jobs:
        if j.current is None or not j.current.nodes:
            continue
        gpus: dict[NodeId, int] = {}
        for n, g in j.current.nodes:
            gpus[n] = gpus.get(n, 0) + g
        out.append(JobFootprint(j.id, gpus, j.spec.min_workers))
    return out


@dataclass(slots=True)
class DemandMemory:
    """The serving demand of the last ``window_s`` seconds, so that a lend waits until a
    drop has lasted: demand noise of a server or two then lends nothing that the next
    rise would reclaim (preempting what runs there). A rise is met at once. Unlike a
    reserve of idle servers, it holds nothing back once a drop is real.
    """

    window_s: float
    points: list[tuple[float, int]] = field(default_factory=list)
    """``(time, demand)`` at each change: the one in force when the window opens, then
    every later one."""

    def held(self, now: float, demand: int) -> int:
        """Record ``demand`` at ``now``; the highest demand in force over the window."""
        if not self.points or self.points[-1][1] != demand:
            self.points.append((now, demand))
        start = now - self.window_s
        while len(self.points) > 1 and self.points[1][0] <= start:
            self.points.pop(0)
        return max(d for _, d in self.points)


def decide_loans(
    snap: ClusterSnapshot,
    reclaim: ReclaimMode = "knapsack",
    reserve: int = 0,
    held_demand: int | None = None,
    price: Callable[[JobView], float] | None = None,
) -> LoanDecision:
    """Lend what serving does not need; reclaim (by ``reclaim``) what it needs back.

    ``reserve`` idle servers stay with serving (hysteresis): demand noise of a server or
    two then does not reclaim a server, preempting its jobs, only to lend it again.
    ``held_demand`` (:class:`DemandMemory`), if given, is the demand lending must leave
    room for; reclaiming follows the demand of now. ``price`` (a job's restart, in
    seconds) weighs the knapsack's server values (:func:`plan_reclaim`).
    """
    inference = sorted(n.id for n in snap.nodes if n.pool == "inference")
    lent = [n for n in inference if n in snap.lent_nodes]
    serving = [n for n in inference if n not in snap.lent_nodes]
    demand = max(0, min(snap.serving_demand, len(inference)))
    keep = demand if held_demand is None else max(demand, min(held_demand, len(inference)))
    if len(serving) > keep + reserve:
        # Lend the highest ids first, so the same servers tend to stay on loan.
        extra = sorted(serving, reverse=True)[: len(serving) - keep - reserve]
        return LoanDecision(lend=frozenset(lent) | frozenset(extra))
    need = demand - len(serving)
    if need <= 0:
        return LoanDecision(lend=frozenset(lent))
    if reclaim == "naive":
        picked = naive_reclaim(lent, need)
        caps: dict[JobId, int] = {}
        for f in footprints(snap):
            if any(n in f.gpus_on for n in picked):
                caps[f.job_id] = 0  # Basic preempts every job on a reclaimed server
        return LoanDecision(lend=frozenset(lent) - set(picked), reclaimed=picked, workers_cap=caps)
    feet = footprints(snap)
    prices = None
    if price is not None:
        by_id = {j.id: j for j in snap.active_jobs}
        prices = {f.job_id: price(by_id[f.job_id]) for f in feet}
    plan = plan_reclaim(lent, feet, need, prices)
    return LoanDecision(
        lend=frozenset(lent) - set(plan.order),
        reclaimed=plan.order,
        plan=plan,
        workers_cap=dict(plan.workers_left),
    )
