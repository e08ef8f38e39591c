"""Is a job's entrypoint importable? Asked of a short-lived Ray task, never the scheduler.

WHY: importing a module runs its code. The scheduler used to import each entrypoint in
its own actor, so a user module that raised, called ``sys.exit`` or hung at import ran
inside the scheduler (a hang held a scheduler thread forever; ``os._exit`` would have
ended the scheduler). The import now runs in a Ray task with the job's own runtime env
(so the user's directory and packages are there, as they will be for the run), in a
worker process used for this one task (``max_calls=1``: no user module stays loaded in a
pooled worker), on the head node like the runs' actors, under a timeout after which the
task is cancelled with ``force=True`` (its process killed). The scheduler only reads the
answer.

A check costs a fresh worker process (and the env's setup the first time), so answers
are kept: an import that worked for 10 minutes, one that failed for 1 (a timeout, which
a loaded cluster can cause, is never kept), and concurrent checks of the same
entrypoint and env wait for the first instead of each starting a process.

The timeout bounds the user's import alone. The task is a Ray generator that reports
once its process is up and lyra's own modules and PyTorch are loaded, and only then
imports the user's module: a worker slow to start (a loaded host, a runtime env being set up) is not
a module that blocks at import. Before, one timeout covered both, and under a one-core
CPU hog a fresh worker took longer than the 15 s a test allows to start and import
PyTorch, so an importable job was refused. The start has its own, longer bound
(:data:`START_S`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ray

OK_TTL_S = 600.0
FAILED_TTL_S = 60.0
START_S = 300.0
"""The longest wait for the check's worker to start and load lyra (the job's runtime env
set up first), before the import's own timeout begins: at least the import's timeout."""
STARTED = "started"


@ray.remote(num_cpus=0, max_retries=0, max_calls=1)
def _import_entrypoint(entrypoint: str) -> Iterator[str | None]:
    """Yields :data:`STARTED` once up, then None if ``module:function`` imports, is
    callable and has a signature Ray Train calls (:mod:`lyra_ray.train.signature`), else
    why not: one line, after "field 'entrypoint': "."""
    import importlib.util

    import lyra_ray.train.user_code  # noqa: F401  (loaded before the clock starts)

    if importlib.util.find_spec("torch") is not None:
        # Every run of a job imports PyTorch (Ray Train's torch backend, lyra's loop), so
        # the check has it loaded too before its clock starts: importing it is not the
        # user's module blocking (2-3 s on an idle core, several times that on a busy one).
        import torch  # noqa: F401

    yield STARTED
    yield _why_not(entrypoint)


def _why_not(entrypoint: str) -> str | None:
    """The check itself, in the task's process (see :func:`_import_entrypoint`)."""
    from lyra_ray.train.signature import signature_error
    from lyra_ray.train.user_code import resolve

    module, _, attr = entrypoint.partition(":")
    try:
        fn = resolve(entrypoint)
    except BaseException as e:  # SystemExit and KeyboardInterrupt at import are the user's
        text = " ".join(str(e).split())[:300]
        return f"cannot import {entrypoint!r}: " + (
            f"{type(e).__name__}: {text}" if text else type(e).__name__
        )
    if not callable(fn):
        return f"{attr!r} in module {module!r} is not callable"
    why = signature_error(fn)
    return None if why is None else f"Ray Train cannot call {entrypoint!r}: {why}"


class EntrypointChecker:
    """Runs and remembers entrypoint checks; thread-safe (the scheduler is threaded)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._done: dict[str, tuple[float, str | None]] = {}
        self._running: dict[str, threading.Event] = {}

    def check(self, entrypoint: str, env: Mapping[str, Any] | None) -> str | None:
        """None if importable, else an error message naming the field at fault."""
        key = json.dumps([entrypoint, env or {}], sort_keys=True)
        while True:
            with self._lock:
                hit = self._done.get(key)
                if hit is not None and hit[0] > time.monotonic():
                    return hit[1]
                waiting = self._running.get(key)
                if waiting is None:
                    self._running[key] = threading.Event()
                    break
            waiting.wait(self.timeout_s + 30.0)
        error: str | None = None
        keep = 0.0
        try:
            error, keep = self._run(entrypoint, env)
        finally:
            with self._lock:
                if keep:
                    self._done[key] = (time.monotonic() + keep, error)
                    if len(self._done) > 1024:  # forget the oldest answers
                        for k in sorted(self._done, key=lambda k: self._done[k][0])[:256]:
                            del self._done[k]
                self._running.pop(key).set()
        return error

    def _run(self, entrypoint: str, env: Mapping[str, Any] | None) -> tuple[str | None, float]:
        gen: Any = _import_entrypoint.options(  # a Ray generator (ObjectRefGenerator)
            runtime_env=dict(env) if env else None,
            resources={"node:__internal_head__": 0.001},
        ).remote(entrypoint)
        start_s = max(START_S, self.timeout_s)
        try:
            if not ray.wait([gen], timeout=start_s)[0]:
                return _stopped(
                    gen,
                    f"the worker to import {entrypoint!r} in did not start within "
                    f"{start_s:.0f} s (a runtime env still installing, or a cluster out of "
                    "CPU); the check was stopped",
                )
            ray.get(next(gen))  # STARTED, or why the worker or its env failed
            if not ray.wait([gen], timeout=self.timeout_s)[0]:
                return _stopped(
                    gen,
                    f"importing {entrypoint!r} did not finish within {self.timeout_s:.0f} s "
                    "(a module that blocks at import); the import was stopped",
                )
            why = ray.get(next(gen))
        except ray.exceptions.RuntimeEnvSetupError as e:
            first = " ".join(str(e).split())[:300]
            return f"field 'runtime_env': Ray could not set it up: {first}", FAILED_TTL_S
        except ray.exceptions.RayError as e:  # the worker died: os._exit, a signal, OOM
            return (
                f"field 'entrypoint': importing {entrypoint!r} ended its worker process "
                f"({type(e).__name__})",
                FAILED_TTL_S,
            )
        if why is None:
            return None, OK_TTL_S
        return f"field 'entrypoint': {why}", FAILED_TTL_S


def _stopped(gen: Any, why: str) -> tuple[str, float]:
    """Kill the check's process and say why; a timeout is never kept (a loaded cluster
    can cause one)."""
    ray.cancel(gen, force=True)
    return f"field 'entrypoint': {why}", 0.0
