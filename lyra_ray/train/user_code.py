"""Import a job's entrypoint as its own runtime env sees it.

Ray puts the directory its driver started in on the ``sys.path`` of every worker of that
Ray job (``py_driver_sys_path``), ahead of the job's ``working_dir``. Every run lyra
starts belongs to the Ray job of whoever started the scheduler actor: started from a
checkout, or from any folder that has a ``jobs/`` of its own, that folder would shadow a
user's ``jobs`` package in their working dir (``tests/ray/test_user_code.py`` found it).
So, where a user's code is imported (the entrypoint check, the run's own actor, every
Train worker), the driver's directories move to the end of ``sys.path``: the job's own
code wins, and an entrypoint only the driver's folder holds still imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from lyra_ray.train.signature import call_loop, signature_error


def _driver_paths() -> list[str]:
    try:
        import ray

        core = ray._private.worker.global_worker.core_worker  # type: ignore[attr-defined]
        return list(core.get_job_config().py_driver_sys_path)
    except Exception:  # not in a Ray worker, or a Ray without it: nothing to reorder
        return []


def prefer_job_code() -> None:
    """Move the scheduler driver's directories behind the job's own on ``sys.path``."""
    driver = set(_driver_paths())
    if driver & set(sys.path):
        sys.path[:] = [p for p in sys.path if p not in driver] + [
            p for p in sys.path if p in driver
        ]


def resolve(entrypoint: str) -> Any:
    """What ``"module:function"`` names, imported with the job's code first; raises
    ValueError for a malformed name, and whatever the import raises."""
    module, sep, attr = entrypoint.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"entrypoint {entrypoint!r} is not 'module:function'")
    prefer_job_code()
    return getattr(importlib.import_module(module), attr)


def load_entrypoint(entrypoint: str) -> Callable[..., Any]:
    """:func:`resolve`, and a TypeError if it is not callable or Ray Train would not
    call it (:func:`~lyra_ray.train.signature.signature_error`)."""
    fn = resolve(entrypoint)
    if not callable(fn):
        raise TypeError(f"entrypoint {entrypoint!r} is not callable")
    why = signature_error(fn)
    if why is not None:
        raise TypeError(f"entrypoint {entrypoint!r}: {why}")
    return fn  # type: ignore[no-any-return]


def user_loop(config: dict[str, Any], *, entrypoint: str) -> Any:
    """The function every Train worker runs: the user's loop, imported there (not
    unpickled by reference, which would import it before the paths are put right), and
    called as Ray Train would call it (:func:`~lyra_ray.train.signature.call_loop`)."""
    return call_loop(load_entrypoint(entrypoint), config)
