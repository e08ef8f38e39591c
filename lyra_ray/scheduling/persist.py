"""The core's durable state: what :meth:`SchedulerCore.to_state` writes and a restarted
core loads.

Part of the core (it reads and restores the core's own fields), kept in its own module
so that what a restart needs is listed in one place: jobs, nodes, loans, the round
clock, the last allocation (it stays in force until the next solve), the round
bookkeeping, the policy's own state and what the throughput model learnt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lyra_ray import model as m
from lyra_ray.model.state import (
    allocation_from_dict,
    allocation_to_dict,
    job_from_dict,
    job_to_dict,
)

if TYPE_CHECKING:
    from lyra_ray.scheduling.core import SchedulerCore


def core_to_state(core: SchedulerCore) -> dict[str, Any]:
    """JSON-safe, deterministic key order."""
    rounds = core._rounds.to_state() if core._rounds is not None else None
    return {
        "now": core.now,
        "jobs": [job_to_dict(core.jobs[k]) for k in sorted(core.jobs)],
        "nodes": [
            {"id": n.id, "gpu_type": n.gpu_type, "num_gpus": n.num_gpus, "pool": n.pool}
            for n in (core.nodes[k] for k in sorted(core.nodes))
        ],
        "lent": sorted(core.lent),
        "serving_demand": core.serving_demand,
        "reclaims": core.reclaims,
        "next_round_s": core.next_round_s,
        "allocation": allocation_to_dict(core.allocation),
        "dirty": core._dirty,
        "rounds": rounds,
        "policy": core.policy.to_state(),
        "throughputs": core.throughputs.to_state(),
    }


def core_load_state(core: SchedulerCore, state: dict[str, Any]) -> None:
    core.now = float(state["now"])
    core.jobs = {d["id"]: job_from_dict(d) for d in state["jobs"]}
    core._active = {k: j for k, j in core.jobs.items() if not j.status.terminal}
    # A state written before terminal jobs were handed out (or between two hand-outs)
    # still holds some: the next take_terminal() hands them out.
    core._ended = [k for k, j in core.jobs.items() if j.status.terminal]
    core.nodes = {d["id"]: m.Node(**d) for d in state["nodes"]}
    core.lent = set(state["lent"])
    core.serving_demand = int(state["serving_demand"])
    core.reclaims = int(state.get("reclaims", 0))
    nr = state.get("next_round_s")
    core.next_round_s = None if nr is None else float(nr)
    if state.get("rounds") is not None:
        core.rounds.load_state(state["rounds"])
    core.policy.load_state(state.get("policy") or {})
    core.throughputs.load_state(state.get("throughputs") or {})
    for j in core.jobs.values():
        j.throughput = core._throughput_row(j)
    core._nodes_changed()
    if "allocation" in state:  # a state written before the allocation was kept re-solves
        core.allocation = allocation_from_dict(state["allocation"])
        core._dirty = bool(state["dirty"])
