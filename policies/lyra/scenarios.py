"""The paper's comparison scenarios, as configurations of the Lyra policy's class.

*Basic* and *Baseline* are what Lyra's paper measures Lyra against (docs/lyra.md defines
them). They are settings of :class:`~lyra_ray.policies.lyra.two_phase.LyraPolicy`, not
policies of their own, so that every decision they share with Lyra is the same code;
a change to either needs a reason from the paper (issue #44).
"""

from __future__ import annotations

from typing import ClassVar

from lyra_ray.policies.base import register
from lyra_ray.policies.lyra.two_phase import LyraPolicy


@register
class BasicPolicy(LyraPolicy):
    """The paper's *Basic*: loaning with naive reclaim (preempt by server id), greedy
    elasticity (spare GPUs to admitted elastic jobs in SJF order, each to its max)."""

    name: ClassVar[str] = "basic"

    def __init__(self, **kw: object) -> None:
        super().__init__(
            reclaim="naive",
            flexible="greedy",
            loan_max_remaining_s=None,
            reserve_fraction=0.0,
            mixed_types=False,
            lend_after_s=None,
            move_gain_s=None,
        )


@register
class BaselinePolicy(LyraPolicy):
    """The paper's *Baseline*: no loaning, no elasticity (each job at its requested size)."""

    name: ClassVar[str] = "lyra-baseline"

    def __init__(self, **kw: object) -> None:
        super().__init__(loaning=False, elastic=False, lend_after_s=None, move_gain_s=None)
