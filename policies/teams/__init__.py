"""Teams, quotas and borrowing as policy behaviour: ``TeamPolicy`` wraps any policy.

Not a registered policy (it needs an inner policy and a team set); the simulator builds
it for ``lyra simulate --teams`` and the live scheduler behind its configured policy.
``docs/teams.md`` says what it does and measures it.
"""

from lyra_ray.policies.teams.policy import TeamPolicy, with_teams

__all__ = ["TeamPolicy", "with_teams"]
