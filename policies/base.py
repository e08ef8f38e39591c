"""The one policy signature and the registry that names policies.

Every allocation policy — Gavel's optimisation problems, Lyra's two-phase knapsack,
the baselines — takes the same frozen :class:`ClusterSnapshot` and returns an
:class:`Allocation`. Policies are chosen by short name (``"fifo"``) or by
``"module:Class"`` (Ray Serve's ``policy_function`` style), never by an if/elif factory.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, cast, runtime_checkable

from lyra_ray.model import Allocation, ClusterSnapshot


@runtime_checkable
class Policy(Protocol):
    """An allocation policy: a pure function of the snapshot and of its own saved state.

    Every hook the core may use is declared here; :class:`PolicyBase` gives each its
    default, so the core never probes a policy for optional attributes.
    """

    name: ClassVar[str]
    shuffle_round_types: ClassVar[bool]
    """Whether the round mechanism shuffles the GPU-type order each round (Gavel does
    so for its heterogeneity-agnostic policies)."""
    round_skip_zero_priority: ClassVar[bool]
    """Whether the round mechanism leaves GPUs idle rather than give them to entries the
    allocation gives nothing (Gavel's rule for FIFO)."""

    def allocate(self, snap: ClusterSnapshot) -> Allocation: ...

    def to_state(self) -> dict[str, Any]:
        """Whatever earlier calls left behind that changes later answers (JSON-safe).

        The scheduler persists it with the core's state, so a restarted scheduler makes
        the same next decision as the one that died. Caches that only save time are
        not state and stay out of it.
        """
        ...

    def load_state(self, state: Mapping[str, Any]) -> None: ...

    def waiting(self, snap: ClusterSnapshot, alloc: Allocation) -> Mapping[str, tuple[str, str]]:
        """Why jobs that ``alloc`` (this policy's last answer) leaves without GPUs wait,
        where a rule of the policy's own is the reason: ``(code, sentence)`` by job id.

        Derived when someone asks (``lyra status``), not carried in every answer: a rule
        that keeps 10,000 queued jobs out (a team's quota) would otherwise be written
        with each answer the store commits. ``Allocation.waiting`` carries the reasons a
        policy has at hand anyway; where both name a job, the answer's wins.
        """
        ...


class PolicyBase:
    """The defaults of every :class:`Policy` hook, in one place: no round quirks and no
    state carried between calls. Subclasses override what they need."""

    name: ClassVar[str] = ""
    shuffle_round_types: ClassVar[bool] = False
    round_skip_zero_priority: ClassVar[bool] = False

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        raise NotImplementedError

    def to_state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ValueError(
                f"policy {self.name!r} keeps no state, but a saved state has {sorted(state)}"
            )

    def waiting(self, snap: ClusterSnapshot, alloc: Allocation) -> Mapping[str, tuple[str, str]]:
        return {}


class PolicyError(ValueError):
    """An unknown policy name or a ``module:Class`` that cannot be loaded."""


_REGISTRY: dict[str, Callable[..., Policy]] = {}
_BUILTIN_PACKAGES = (
    "lyra_ray.policies.baselines",
    "lyra_ray.policies.gavel",
    "lyra_ray.policies.lyra",
)

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


def takes_argument(spec: str, name: str) -> bool:
    """Whether the registered policy ``spec`` takes keyword argument ``name`` (False for
    a ``module:Class`` path or an unknown name: the caller then passes nothing extra)."""
    _load_builtins()
    factory = _REGISTRY.get(spec)
    if factory is None:
        return False
    try:
        return name in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def policy_factory(spec: str) -> Callable[..., Any]:
    """What builds policy ``spec``: a registered short name's class, or the callable a
    ``"module:Class"`` path names; :class:`PolicyError` when there is none."""
    if ":" in spec:
        mod_name, _, attr = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as e:
            raise PolicyError(f"policy {spec!r} cannot be loaded: {e}") from e
        if not callable(factory):
            raise PolicyError(f"policy {spec!r} is not a class or factory")
        return factory  # type: ignore[no-any-return]
    _load_builtins()
    if spec not in _REGISTRY:
        raise PolicyError(
            f"unknown policy {spec!r}; known: {', '.join(sorted(_REGISTRY)) or '(none)'}"
        )
    return _REGISTRY[spec]


def get_policy(spec: str, **kwargs: Any) -> Policy:
    """Build a policy from a registered short name or a ``"module:Class"`` path."""
    factory = policy_factory(spec)
    if ":" in spec:
        try:
            policy = factory(**kwargs)
        except TypeError as e:  # `json:dumps` used to end in a traceback (found by fuzzing)
            raise PolicyError(f"policy {spec!r} cannot be built: {e}") from None
    else:
        policy = factory(**kwargs)
    missing = [k for k in _HOOKS if not hasattr(policy, k)]
    if missing:
        raise PolicyError(
            f"policy {spec!r} lacks {', '.join(missing)}: "
            "subclass lyra_ray.policies.base.PolicyBase for the defaults"
        )
    return cast(Policy, policy)


_HOOKS = (
    "name",
    "shuffle_round_types",
    "round_skip_zero_priority",
    "allocate",
    "to_state",
    "load_state",
    "waiting",
)
"""The members of :class:`Policy` (checked by name: a ``module:Class`` policy comes from
user code, and a missing hook must fail at load time with its name, not mid-cycle)."""
