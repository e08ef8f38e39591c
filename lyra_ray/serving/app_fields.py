"""Checks of one field of a user's Serve application config, shared by the application
(:mod:`lyra_ray.serving.app_spec`) and its deployments' overrides
(:mod:`lyra_ray.serving.app_deployment`).

Each takes ``where``, the field as the user wrote it (``service 'chat': field
'deployments[0].num_replicas``), and raises :class:`~lyra_ray.model.errors.InputError`
naming it. Booleans are refused where numbers belong, and JSON values must be finite:
Serve would pass NaN to a user's code, or fail later and farther from the input.

Pure: no Ray.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lyra_ray.model.errors import InputError

MAX_ARGS_BYTES = 64 * 1024
"""The most a JSON field (a builder's ``args``, a ``user_config``) may take."""


def finite(value: Any, where: str, low: float = 0.0, high: float = 1e9) -> float:
    """A finite number in [low, high]; bools and text refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: expected a number, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise InputError(f"{where}: {value!r} is too large") from None
    if not math.isfinite(out) or not low <= out <= high:
        raise InputError(f"{where}: must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return out


def integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise InputError(f"{where}: must be in [{low}, {high}], got {value}")
    return value


def json_value(value: Any, where: str, limit: int = MAX_ARGS_BYTES) -> Any:
    """``value`` if it is JSON (finite numbers, text keys) of at most ``limit`` bytes."""
    try:
        text = json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise InputError(f"{where}: must be JSON (text keys, finite numbers): {e}") from None
    if len(text) > limit:
        raise InputError(f"{where}: {len(text)} bytes as JSON, at most {limit}")
    return json.loads(text)


def known(raw: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; known: {sorted(allowed)}")


def mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value
