"""SchedulerCore: the scheduling state and the decider that reads it, as one object.

Both drivers, the simulator and the live scheduler alike, run it through the one loop
of :mod:`lyra_ray.scheduling.loop`::

    folded = core.fold(now, events)               # 1 fold events into the state
    decision = core.decide(folded)                # 2-7 snapshot, policy, rounds, place, diff
    store.commit(...)                             # live: before acting (crash-safe)
    for sink in sinks: sink.apply(decision.actions)

Two owners live inside. :class:`~lyra_ray.scheduling.state.CoreState` holds jobs, nodes,
loans, serving demand and the round clock, folds events into them and serialises them;
:class:`~lyra_ray.scheduling.decider.Decider` owns the policy, Gavel's rounds, the placer
and the last allocation, and runs steps 2-7 of ARCHITECTURE.md's cycle over the state:
snapshot, policy (which also says which inference nodes to lend), Gavel's rounds (only at
a round boundary, so a round-based policy never preempts mid-round), placement, and the
diff into actions. This class only composes them and keeps the API callers read.

Nothing here reads a clock or touches Ray: the simulator and the live runtime feed the
same events and carry out the same actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lyra_ray import model as m
from lyra_ray.model import ClusterSnapshot, Decision, JobId, NodeId
from lyra_ray.model.restart_cost import RestartModel
from lyra_ray.model.state import JobState
from lyra_ray.policies.base import Policy
from lyra_ray.scheduling.decider import Decider
from lyra_ray.scheduling.interfaces import Placer, RoundMechanismLike, default_rounds
from lyra_ray.scheduling.state import CoreState, Folded
from lyra_ray.scheduling.waiting import WaitReason

__all__ = ["Decision", "Folded", "Placer", "RoundMechanismLike", "SchedulerCore", "default_rounds"]

_NODE_EVENTS = (m.NodeUp, m.NodeDown)


class SchedulerCore:
    def __init__(
        self,
        policy: Policy,
        throughput_model: m.ThroughputModel,
        round_s: float = 360.0,
        rounds: RoundMechanismLike | None = None,
        min_lease_s: float = 0.0,
        startup_grace_s: float = 300.0,
        placer: Placer | None = None,
        backfill: bool = False,
        restart_model: RestartModel | None = None,
    ) -> None:
        """The arguments are the decider's (:class:`~lyra_ray.scheduling.decider.Decider`),
        but the throughput model, which learns from the state's progress reports, and the
        restart model (default: the measured one), which learns from restart records."""
        self.state = CoreState(throughput_model, restart_model)
        self.decider = Decider(
            policy, round_s, rounds, min_lease_s, startup_grace_s, placer, backfill
        )

    # ------------------------------------------------------------------ the cycle

    def fold(self, now: float, events: Sequence[m.Event]) -> Folded:
        """Step 1: account the time running jobs received, then fold ``events`` in."""
        return self.state.fold(now, events)

    def decide(self, folded: Folded) -> Decision:
        """Steps 2-7 over the folded state, and when the core wants to be stepped next."""
        return self.decider.decide(self.state, folded)

    def step(self, now: float, events: Sequence[m.Event]) -> Decision:
        """:meth:`fold` then :meth:`decide`: one whole cycle."""
        return self.decide(self.fold(now, events))

    def reads_progress(self, now: float, events: Sequence[m.Event]) -> bool:
        """Whether the cycle that folds ``events`` at ``now`` reads progress reports.

        Mid-round, a core that holds every job where it is reads none: the loop then
        holds them back (they are absolute step counts, so nothing is lost) instead of
        folding ~one per running job at every step.
        """
        return (
            self.round_due(now, events)
            or not self.holds_mid_round()
            or any(isinstance(e, _NODE_EVENTS) for e in events)
        )

    def round_due(self, now: float, events: Sequence[m.Event]) -> bool:
        return self.state.round_due(now, events)

    def holds_mid_round(self) -> bool:
        return self.decider.holds_mid_round(self.state)

    # ------------------------------------------------------------------ reading

    def active(self) -> list[JobState]:
        return self.state.active()

    def take_terminal(self) -> list[JobState]:
        return self.state.take_terminal()

    def busy_gpus(self) -> dict[NodeId, int]:
        return self.state.busy_gpus()

    def wait_reasons(self) -> dict[JobId, WaitReason]:
        return self.decider.wait_reasons(self.state)

    def snapshot(self) -> ClusterSnapshot:
        return self.state.snapshot(self.decider.round_s)

    def nodes_info(self) -> tuple[tuple[m.Node, ...], frozenset[NodeId]]:
        return self.state.nodes_info()

    @property
    def jobs(self) -> dict[JobId, JobState]:
        return self.state.jobs

    @property
    def nodes(self) -> dict[NodeId, m.Node]:
        return self.state.nodes

    @property
    def lent(self) -> set[NodeId]:
        return self.state.lent

    @property
    def now(self) -> float:
        return self.state.now

    @property
    def next_round_s(self) -> float | None:
        return self.state.next_round_s

    @property
    def serving_demand(self) -> int:
        return self.state.serving_demand

    @property
    def reclaims(self) -> int:
        return self.state.reclaims

    @property
    def throughputs(self) -> m.ThroughputModel:
        return self.state.throughputs

    @property
    def policy(self) -> Policy:
        return self.decider.policy

    @property
    def rounds(self) -> RoundMechanismLike:
        return self.decider.rounds

    @property
    def round_s(self) -> float:
        return self.decider.round_s

    @property
    def cycles(self) -> int:
        return self.decider.cycles

    @property
    def allocation(self) -> m.Allocation:
        return self.decider.allocation

    @allocation.setter
    def allocation(self, value: m.Allocation) -> None:
        self.decider.allocation = value

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """Everything needed to resume: JSON-safe, deterministic key order."""
        return {
            **self.state.to_state(),
            **self.decider.to_state(),
            "throughputs": self.state.throughputs.to_state(),
            "restarts": self.state.restarts.to_state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.state.load_state(state)
        self.decider.load_state(state)
        self.state.throughputs.load_state(state.get("throughputs") or {})
        self.state.restarts.load_state(state.get("restarts") or {})
        self.state.refresh_throughput_rows()
