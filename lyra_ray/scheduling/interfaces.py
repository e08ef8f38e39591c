"""The interfaces inside :class:`~lyra_ray.scheduling.decider.Decider`: what turns time
fractions into rounds, and what puts an assignment on nodes (what feeds the core and
carries its decisions out is the loop's: :mod:`lyra_ray.scheduling.loop`).

Kept apart from the core so that a runtime, a round mechanism or a placer can be typed
against them without importing the core's machinery. Every method the core calls is
declared here: the core never probes for optional hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from lyra_ray import model as m
from lyra_ray.model import Assignment, ClusterSnapshot, JobId, NodeId
from lyra_ray.policies.base import Policy


class RoundMechanismLike(Protocol):
    """Turns a policy's time fractions into this round's assignment (Gavel's rounds)."""

    def assign(
        self,
        snap: ClusterSnapshot,
        allocation: m.Allocation,
        previous: dict[JobId, Assignment],
        pinned: dict[JobId, Assignment] | None = None,
        adopt: bool = True,
    ) -> dict[JobId, Assignment]: ...

    def would_adopt(self, snap: ClusterSnapshot) -> bool:
        """Whether a round now would take a new allocation (else the old one stays), so
        the core can skip a solve whose answer would be ignored."""
        ...

    @property
    def rounds_done(self) -> int:
        """Rounds assigned so far (what ``lyra status`` shows as the current round)."""
        ...

    def to_state(self) -> dict[str, Any]: ...

    def load_state(self, state: Mapping[str, Any]) -> None: ...


class Placer(Protocol):
    """Puts each job's (GPU type, worker count) on concrete nodes."""

    def place(
        self,
        desired: Mapping[JobId, Assignment],
        snap: ClusterSnapshot,
        previous: Mapping[JobId, Assignment],
        preferred: Mapping[JobId, tuple[NodeId, ...]] | None = None,
    ) -> dict[JobId, Assignment]:
        """``desired`` placed on nodes; a job that does not fit is left out. A job whose
        type and size did not change keeps its ``previous`` nodes (no needless move)."""
        ...


def default_rounds(policy: Policy, **overrides: Any) -> RoundMechanismLike:
    """Gavel's mechanism, with the round quirks the policy declares."""
    from lyra_ray.scheduling.rounds import RoundMechanism

    kwargs: dict[str, Any] = {
        "shuffle_types": policy.shuffle_round_types,
        "skip_zero_priority": policy.round_skip_zero_priority,
    }
    return RoundMechanism(**(kwargs | overrides))
