"""How a user's training function is called: exactly as Ray Train calls it.

Ray Train (``ray/train/_internal/utils.py:count_required_parameters``, used by both its
v1 ``DataParallelTrainer`` and v2 ``construct_train_func``) counts the parameters that
must be given positionally, ``*args`` included as one, and calls the function with the
config when that count is 1, with nothing when it is 0, and refuses it above 1. lyra
calls users' functions in three places (every Train worker, the one-worker profiler, and
the entrypoint check at submission); each uses this module, so a ``def train(*args,
**kwargs)`` wrapper (a decorator without ``functools.wraps``) gets its config everywhere,
as it would under plain Ray Train, and a function Ray Train would refuse is refused at
submission instead of failing on every worker. ``tests/unit/test_user_signature.py``
compares :func:`required_positional` with Ray's own function over every signature Ray
Train accepts and some it refuses.

The module imports nothing but the standard library.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

_POSITIONAL = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL,
)


def required_positional(fn: Callable[..., Any]) -> int:
    """Ray Train's count: parameters without a default that take a positional argument,
    ``*args`` counted as one. Raises ValueError/TypeError where ``inspect`` cannot read a
    signature (Ray Train fails there too)."""
    return sum(
        1
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind in _POSITIONAL
    )


def signature_error(fn: Callable[..., Any]) -> str | None:
    """None if Ray Train would call ``fn``, else one line saying why it would not."""
    try:
        n = required_positional(fn)
    except (TypeError, ValueError) as e:
        return f"its signature cannot be read ({type(e).__name__}: {e})"
    if n > 1:
        return (
            f"it takes {n} required positional arguments; Ray Train calls a training "
            "function with none, or with one (its config dict)"
        )
    keyword = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    if keyword:  # Ray Train accepts it, then every worker fails calling it
        return (
            f"it requires keyword-only argument(s) {', '.join(map(repr, keyword))}, which "
            "Ray Train never passes"
        )
    return None


def call_loop(fn: Callable[..., Any], config: Mapping[str, Any]) -> Any:
    """Call ``fn`` as Ray Train would: ``fn(config)`` if it requires one positional
    argument, ``fn()`` if none; a TypeError naming the rule otherwise."""
    why = signature_error(fn)
    if why is not None:
        raise TypeError(f"the training function cannot be called: {why}")
    return fn(config) if required_positional(fn) == 1 else fn()
