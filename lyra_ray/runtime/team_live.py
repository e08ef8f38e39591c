"""The teams layer in the live scheduler: the same wrapper the simulator builds.

:class:`LiveTeamPolicy` sits between the core and the configured policy. While no team
but the unlimited ``default`` exists it calls the policy as it is (decisions exactly as
before teams existed); once one does, every call goes through
:func:`lyra_ray.policies.teams.with_teams` around the same policy, fed a
:class:`~lyra_ray.model.teams.TeamSet` of the teams, memberships and each job's team as
the scheduler keeps them (:class:`~lyra_ray.runtime.team_registry.TeamRegistry`), so
``lyra simulate --teams`` and the live cluster decide by one code path. Jobs its quota
keeps out wait with the code ``quota`` and a sentence saying so.

WHY jobs are mapped to teams by their spec object: a live job's team is the one it was
submitted under (kept with the job, restart-safe), which may differ from its owner's
team now; the pure ``TeamSet`` resolves a spec, and the snapshot's views share the
core's spec objects, so one dictionary built per decision is exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from lyra_ray.model import ClusterSnapshot, JobSpec
from lyra_ray.model.team_accounting import TeamStanding, account
from lyra_ray.model.teams import TeamSet
from lyra_ray.model.types import Allocation, GpuType
from lyra_ray.policies.base import Policy, PolicyBase
from lyra_ray.policies.teams import with_teams

if TYPE_CHECKING:
    from lyra_ray.runtime.metrics import SchedulerMetrics
    from lyra_ray.runtime.team_registry import TeamRegistry
    from lyra_ray.scheduling.core import SchedulerCore


@dataclass(frozen=True)
class LiveTeamSet(TeamSet):
    """A :class:`TeamSet` whose jobs' teams are known per job (by spec object)."""

    by_spec: Mapping[int, str] = field(default_factory=dict)

    def team_of(self, spec: JobSpec) -> str:
        team = self.by_spec.get(id(spec))
        if team is not None and team in self.teams:
            return team
        return TeamSet.team_of(self, spec)


TeamsOf = Callable[[ClusterSnapshot], LiveTeamSet]
"""The team set for one snapshot (the registry's :meth:`for_snapshot`)."""


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


def uses(snap: ClusterSnapshot) -> Iterable[tuple[JobSpec, GpuType, float]]:
    """(spec, GPU type, workers) of every running job's every part (mixed types too)."""
    for j in snap.jobs:
        a = j.current
        if a is None:
            continue
        extra = sum(n for _, n in a.extra)
        if a.workers - extra > 0:
            yield j.spec, a.gpu_type, float(a.workers - extra)
        for g, n in a.extra:
            yield j.spec, g, float(n)


def standings(snap: ClusterSnapshot, teams: TeamSet) -> list[TeamStanding]:
    """Each team's guarantee, use, borrowed and lent capacity now (by name)."""
    got = account(teams, snap.gpus_by_type(), uses(snap), snap.throughput_model)
    return [got[n] for n in sorted(got)]


class TeamMetrics:
    """The loop's observer that exports ``lyra_team_*`` every cycle (while export is on):
    each team's guarantee, use, borrowed and lent capacity by GPU type (or
    ``effective``, in V100-equivalents)."""

    EVERY_S = 5.0
    """How often the gauges are set: well within the ~20 s after which Ray drops a
    series not set again, and a snapshot's cost is not paid every cycle."""

    def __init__(self, registry: TeamRegistry, metrics: SchedulerMetrics | None) -> None:
        self.registry, self.metrics = registry, metrics
        self._at = -math.inf

    def observe(self, core: SchedulerCore, cycle: Any) -> None:
        if self.metrics is None or not self.metrics.enabled:
            return
        now = time.monotonic()
        if now - self._at < self.EVERY_S:
            return
        self._at = now
        self.metrics.observe_teams(self.registry.standings(core.snapshot()))
