"""A policy's own settings, checked at the boundary: ``lyra simulate --policy-arg
KEY=VALUE`` and the live config's ``policy_args``.

Why its own boundary: a policy's constructor takes Python values and trusts them. Lyra's
``move_gain_s`` given as the word ``soon`` was accepted and failed deep inside a
decision, a setting the policy does not have was a ``TypeError`` traceback, and
``basic`` (which keeps the paper's definition whatever it is passed) would have ignored
every setting without a word. Each item is parsed as one YAML scalar (``3600``,
``null``, ``true``, ``rigid``) and checked against the constructor's signature and type
hints (pydantic), so a refusal names the setting and what it takes.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from lyra_ray.policies.base import PolicyError, policy_factory


def _settings(factory: Callable[..., Any]) -> dict[str, Any]:
    """The named settings the factory takes, each with its type hint (``Any`` if none)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # a user's policy with hints that do not resolve: names only
        hints = {}
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {n: hints.get(n, Any) for n, p in params.items() if p.kind in kinds}


def _scalar(key: str, text: str) -> Any:
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        value = text
    if isinstance(value, list | dict):
        raise PolicyError(f"{key}: takes one value (a number, true/false, null or a word)")
    return value


def check_policy_args(spec: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as the keyword arguments of policy ``spec``, each checked against the
    setting of that name; raises :class:`PolicyError` naming the setting."""
    if not values:
        return {}
    takes = _settings(policy_factory(spec))
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in takes:
            known = ", ".join(sorted(takes)) if takes else "none: it keeps its own definition"
            raise PolicyError(f"policy {spec!r} has no setting {key!r} (its settings: {known})")
        if isinstance(value, float) and not math.isfinite(value):
            raise PolicyError(f"{key}: must be a finite number or null, got {value!r}")
        try:
            out[key] = TypeAdapter(takes[key]).validate_python(value)
        except ValidationError as e:
            why = e.errors()[0]["msg"] if e.errors() else str(e)
            raise PolicyError(f"{key}: {why}, got {value!r}") from None
        except Exception:  # a hint pydantic cannot check (a user's class): as given
            out[key] = value
    return out


def parse_policy_args(spec: str, items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (each value one YAML scalar) as :func:`check_policy_args`
    checks them; raises :class:`PolicyError` naming the item."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PolicyError(f"expected KEY=VALUE, got {item!r}")
        if key in values:
            raise PolicyError(f"{key}: given twice")
        values[key] = _scalar(key, text)
    return check_policy_args(spec, values)
