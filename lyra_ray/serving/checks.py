"""Number checks shared by the serving inputs: each refusal is a ValueError naming the field.

Pure. Booleans are refused although Python counts them as ints: ``True`` where a rate
belongs is a mistake in the input, not the number one.
"""

from __future__ import annotations

import math


def finite(name: str, value: object) -> float:
    """``value`` as a finite float, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out
