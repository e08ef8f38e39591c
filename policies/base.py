"""The one policy signature and the registry that names policies.

Every allocation policy — Gavel's optimisation problems, Lyra's two-phase knapsack,
the baselines — takes the same frozen :class:`ClusterSnapshot` and returns an
:class:`Allocation`. Policies are chosen by short name (``"fifo"``) or by
``"module:Class"`` (Ray Serve's ``policy_function`` style), never by an if/elif factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from lyra_ray.model import Allocation, ClusterSnapshot


@runtime_checkable
class Policy(Protocol):
    """An allocation policy: a pure function of the snapshot (it may keep caches)."""

    name: ClassVar[str]

    def allocate(self, snap: ClusterSnapshot) -> Allocation: ...


class PolicyError(ValueError):
    """An unknown policy name or a ``module:Class`` that cannot be loaded."""


_REGISTRY: dict[str, Callable[..., Policy]] = {}
_BUILTIN_PACKAGES = ("policies.baselines", "policies.gavel", "policies.lyra")

P = TypeVar("P")


def register(cls: P) -> P:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls!r} needs a non-empty class attribute 'name'")
    _REGISTRY[name] = cls  # type: ignore[assignment]
    return cls


def _load_builtins() -> None:
    for pkg in _BUILTIN_PACKAGES:
        try:
            importlib.import_module(pkg)
        except ModuleNotFoundError as e:  # a package still being written must not break others
            if e.name != pkg:
                raise


def available_policies() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def get_policy(spec: str, **kwargs: Any) -> Policy:
    """Build a policy from a registered short name or a ``"module:Class"`` path."""
    if ":" in spec:
        mod_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as e:
            raise PolicyError(f"policy {spec!r} cannot be loaded: {e}") from e
        policy = factory(**kwargs)
    else:
        _load_builtins()
        if spec not in _REGISTRY:
            raise PolicyError(
                f"unknown policy {spec!r}; known: {', '.join(sorted(_REGISTRY)) or '(none)'}"
            )
        policy = _REGISTRY[spec](**kwargs)
    if not isinstance(policy, Policy):
        raise PolicyError(f"policy {spec!r} has no allocate(snapshot) method")
    return policy
