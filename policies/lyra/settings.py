"""What the Lyra policy's settings may be, checked when it is built.

Why its own place: the policy is built from Python, from ``lyra simulate --policy-arg``
and from the live config's ``policy_args`` (the last two type-checked first by
:mod:`lyra_ray.policies.args`); a value of the right type can still hang a decision or
mean nothing, and the policy is where its ranges are known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

MAX_SEARCH_LIMIT = 8
"""Phase 2 tries every order of up to ``search_limit`` elastic jobs per type: 8! is
40,320 orders a decision; 12 would be 479 million, a decision that never ends."""


def check_settings(
    search_limit: int,
    reserve_fraction: float,
    finish_first: object,
    seconds: Mapping[str, float | None],
) -> None:
    """Refuse settings that would hang or silently mean nothing, naming the setting."""
    if not 0 <= search_limit <= MAX_SEARCH_LIMIT:
        raise ValueError(f"search_limit must be in [0, {MAX_SEARCH_LIMIT}], not {search_limit!r}")
    if not 0.0 <= reserve_fraction <= 1.0:
        raise ValueError(f"reserve_fraction must be in [0, 1], not {reserve_fraction!r}")
    if finish_first not in (None, "rigid", "all"):
        raise ValueError(f"finish_first must be None, 'rigid' or 'all', not {finish_first!r}")
    for name, v in seconds.items():
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number of seconds >= 0 or None, not {v!r}")
