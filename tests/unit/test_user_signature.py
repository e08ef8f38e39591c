"""Users' training functions are called as Ray Train calls them (issue #42, item 2).

Ray Train counts the parameters that must be passed positionally, ``*args`` as one
(``ray.train._internal.utils.count_required_parameters``), calls the function with its
config when the count is 1 and with nothing when it is 0, and refuses more. lyra used to
ignore ``*args``, so a ``def train(*args, **kwargs)`` wrapper was called with nothing.
Every signature Ray Train accepts is checked here against Ray's own count, and against
what :func:`call_loop` passes; the live path (a wrapper submitted through
``ray job submit --working-dir``) is ``tests/ray/test_user_code.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from lyra_ray.train.signature import call_loop, required_positional, signature_error

CONFIG = {"lr": 0.1}


def none() -> Any:
    return ("none",)


def config_only(config: dict[str, Any]) -> Any:
    return ("config", config)


def config_default(config: dict[str, Any] | None = None) -> Any:
    return ("default", config)


def star_args(*args: Any) -> Any:
    return ("args", args)


def star_both(*args: Any, **kwargs: Any) -> Any:
    return ("both", args, kwargs)


def two(config: dict[str, Any], extra: int) -> Any:
    return ("two", config, extra)


def keyword_only(*, config: dict[str, Any]) -> Any:
    """Ray counts it 0 and calls it with nothing: it can never run."""
    return ("kw", config)


def _no_wraps(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


def _with_wraps(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class Callable1:
    def __call__(self, config: dict[str, Any]) -> Any:
        return ("object", config)


ACCEPTED: dict[str, tuple[Callable[..., Any], Any]] = {
    "none": (none, ("none",)),
    "(config)": (config_only, ("config", CONFIG)),
    "(config=None)": (config_default, ("default", None)),
    "(*args)": (star_args, ("args", (CONFIG,))),
    "(*args, **kwargs)": (star_both, ("both", (CONFIG,), {})),
    "partial": (functools.partial(two, extra=3), ("two", CONFIG, 3)),
    "decorated, no wraps": (_no_wraps(config_only), ("config", CONFIG)),
    "decorated, wraps": (_with_wraps(config_only), ("config", CONFIG)),
    "decorated none, wraps": (_with_wraps(none), ("none",)),
    "callable object": (Callable1(), ("object", CONFIG)),
    "lambda": (lambda: "lambda", "lambda"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_every_signature_ray_train_accepts_is_called_as_ray_calls_it(name: str) -> None:
    from ray.train._internal.utils import count_required_parameters

    fn, expected = ACCEPTED[name]
    assert required_positional(fn) == count_required_parameters(fn) <= 1
    assert signature_error(fn) is None
    assert call_loop(fn, CONFIG) == expected


def test_ray_trains_own_construction_passes_the_same_arguments() -> None:
    """Ray Train v2's own wrapper around the function, side by side with call_loop."""
    import contextlib

    from ray.train.v2._internal.util import construct_train_func

    for name, (fn, expected) in ACCEPTED.items():
        built = construct_train_func(fn, CONFIG, contextlib.nullcontext)
        assert built() == expected == call_loop(fn, CONFIG), name


@pytest.mark.parametrize(
    "fn",
    [two, functools.partial(two), lambda a, b: None, _no_wraps(two)],
    ids=["two", "partial", "lambda", "wrapper-without-wraps"],  # stable: no addresses
)
def test_a_function_ray_train_refuses_is_refused_in_one_line(fn: Callable[..., Any]) -> None:
    from ray.train._internal.utils import count_required_parameters

    n = required_positional(fn)
    assert n == count_required_parameters(fn) and (n > 1 or fn is not two)
    if n <= 1:  # a wrapper without wraps hides the arity: Ray accepts it, and so do we
        assert signature_error(fn) is None
        return
    why = signature_error(fn)
    assert why is not None and "\n" not in why and f"{n} required positional" in why
    with pytest.raises(TypeError, match="cannot be called"):
        call_loop(fn, CONFIG)


def test_a_required_keyword_only_argument_is_refused_before_any_worker_fails() -> None:
    """Ray Train's check lets it through and every worker then raises; lyra says why at
    submission."""
    why = signature_error(keyword_only)
    assert why is not None and "'config'" in why and "never passes" in why
    with pytest.raises(TypeError, match="cannot be called"):
        call_loop(keyword_only, CONFIG)


def test_an_unreadable_signature_is_refused_not_raised() -> None:
    class NoSignature:
        __signature__ = "not a signature"  # inspect raises TypeError reading it

        def __call__(self) -> None: ...

    why = signature_error(NoSignature())
    assert why is not None and why.startswith("its signature cannot be read")
