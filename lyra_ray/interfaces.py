"""The interfaces around :class:`~lyra_ray.core.SchedulerCore`: what carries its
decisions out (a runtime) and what turns time fractions into rounds.

Kept apart from the core so that a runtime or an alternative round mechanism can be
typed against them without importing the core's machinery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, JobId
from policies.base import Policy


class Runtime(Protocol):
    """What carries the core's decisions out: :class:`SimRuntime` or ``RayRuntime``."""

    def apply(self, actions: Sequence[m.Action]) -> None: ...

    def poll(self) -> list[m.Event]: ...


class RoundMechanismLike(Protocol):
    def assign(
        self,
        snap: ClusterSnapshot,
        allocation: m.Allocation,
        previous: dict[JobId, Assignment],
        pinned: dict[JobId, Assignment] | None = None,
    ) -> dict[JobId, Assignment]: ...

    def to_state(self) -> dict[str, Any]: ...


def default_rounds(policy: Policy, **overrides: Any) -> RoundMechanismLike:
    """Gavel's mechanism; policies opt into Gavel's per-policy quirks by class attributes."""
    from lyra_ray.rounds import RoundMechanism

    kwargs: dict[str, Any] = {
        "shuffle_types": bool(getattr(policy, "shuffle_round_types", False)),
        "skip_zero_priority": bool(getattr(policy, "round_skip_zero_priority", False)),
    }
    return RoundMechanism(**(kwargs | overrides))
