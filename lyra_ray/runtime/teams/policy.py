"""The teams layer in the live scheduler: the same wrapper the simulator builds.

:class:`LiveTeamPolicy` sits between the core and the configured policy. While no team
but the unlimited ``default`` exists it calls the policy as it is (decisions exactly as
before teams existed); once one does, every call goes through
:func:`lyra_ray.policies.teams.with_teams` around the same policy, fed a
:class:`~lyra_ray.runtime.teams.sets.LiveTeamSet` of the teams, memberships, settings
and each job's team as the scheduler keeps them (the registry's ``for_snapshot``), so
``lyra simulate --teams`` and the live cluster decide by one code path. Jobs its quota
keeps out wait with the code ``quota`` and a sentence saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lyra_ray.model import ClusterSnapshot
from lyra_ray.model.types import Allocation
from lyra_ray.policies.base import Policy, PolicyBase
from lyra_ray.policies.teams import with_teams
from lyra_ray.runtime.teams.sets import LiveTeamSet

TeamsOf = Callable[[ClusterSnapshot], LiveTeamSet]
"""The team set for one snapshot (the registry's ``for_snapshot``)."""


class LiveTeamPolicy(PolicyBase):
    """The configured policy, inside the teams wrapper whenever a limited team exists.

    Build it with :func:`live_team_policy` (it carries the inner policy's name and
    round quirks over). Its saved state is the inner policy's, unchanged.
    """

    name: ClassVar[str] = "teams"

    def __init__(self, inner: Policy, teams_of: TeamsOf) -> None:
        self.inner = inner
        self.teams_of = teams_of
        self.wrapped = with_teams(inner, LiveTeamSet(teams={}))

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        teams = self.teams_of(snap)
        if not teams.any_limited:
            return self.inner.allocate(snap)
        self.wrapped.teams = teams
        return self.wrapped.allocate(snap)

    def waiting(self, snap: ClusterSnapshot, alloc: Allocation) -> Mapping[str, tuple[str, str]]:
        teams = self.teams_of(snap)
        if not teams.any_limited:
            return self.inner.waiting(snap, alloc)
        self.wrapped.teams = teams
        return self.wrapped.waiting(snap, alloc)

    def to_state(self) -> dict[str, Any]:
        return self.inner.to_state()

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.inner.load_state(state)

    def __getattr__(self, name: str) -> Any:  # the inner policy's own attributes
        if name in ("inner", "teams_of", "wrapped"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def live_team_policy(inner: Policy, teams_of: TeamsOf) -> LiveTeamPolicy:
    """``inner`` behind the live teams layer, with the inner class's name and quirks."""
    cls: type[LiveTeamPolicy] = type(
        f"LiveTeamPolicy[{type(inner).__name__}]",
        (LiveTeamPolicy,),
        {
            "name": inner.name,
            "shuffle_round_types": inner.shuffle_round_types,
            "round_skip_zero_priority": inner.round_skip_zero_priority,
        },
    )
    return cls(inner, teams_of)
