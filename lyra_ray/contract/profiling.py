"""What ``lyra profile`` and a job's step loop agree on: the config key and the hook.

WHY in the contract: the profiler (:mod:`lyra_ray.profiling`) runs a user's loop through
:class:`lyra_ray.train.StepLoop` and the step loop reports each step to the profiler's
measurement. Kept here, neither imports the other for it: the profiler builds on the
step loop, and the step loop (which every user's Train loop imports) never loads the
profiler.
"""

from __future__ import annotations

from collections.abc import Callable

PROFILE_KEY = "lyra_profile"
"""The config key that puts :class:`lyra_ray.train.StepLoop` in profile mode."""

_ACTIVE: list[Callable[[int], bool]] = []


def set_active(hook: Callable[[int], bool] | None) -> None:
    """Install the measurement a user's loop reports to: ``hook(steps)`` is called after
    every step by :class:`lyra_ray.train.StepLoop` in profile mode and returns True when
    the loop should stop. One per process: a measured job runs in a process of its own."""
    _ACTIVE[:] = [] if hook is None else [hook]


def active() -> Callable[[int], bool] | None:
    """The installed measurement, if any."""
    return _ACTIVE[0] if _ACTIVE else None
