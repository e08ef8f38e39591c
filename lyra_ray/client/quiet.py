"""Ray's and Serve's own chatter stays in their log files unless the user asks (``-v``).

WHY: a newcomer reading ``lyra status`` or ``make demo`` should read lyra's lines, not
"Connecting to existing Ray cluster", every Serve controller event or every raylet
warning. Ray still writes all of it under its session's ``logs/`` directory; ``lyra -v``
(or ``LYRA_VERBOSE=1``) brings it back to the terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

VERBOSE_ENV = "LYRA_VERBOSE"
STARTUP_CONCURRENCY = "8"
"""Worker processes a raylet may start at once. Ray's default is the node's CPU count
(1 on our heads), and it warns on every driver as soon as four times that many start
together, which a Serve deployment or a Train run on a small node does routinely."""
PROXY_READY_CHECK_S = "30"
"""How long Serve's controller waits for a new HTTP proxy to say it is ready, per check
(three checks, then it kills the proxy and starts another; Serve's default is 5 s).
WHY: a proxy is a fresh worker process that imports Serve's HTTP stack; on a small busy
host (two cores, one hogged, a second live test module beside it) it was not up within
three 5-s checks, the controller killed it, and its successor fared no better in 120 s,
so ``lyra moe serve`` found no proxy (docs/testing.md, 2026-12-01). A slow start is
waited for; a proxy that started and then hangs is still found by the health checks."""
NODE_DEFAULTS = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": PROXY_READY_CHECK_S}
"""What lyra sets in the environment of every Ray node it starts (embedded, ``lyra up``,
a host cluster), unless the caller's own environment sets it."""

_LOGGERS = ("ray", "ray.serve", "ray.train", "ray.tune", "ray.data")


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def set_verbose(on: bool) -> None:
    """Record the CLI's ``-v`` for everything this process and its children start."""
    if on:
        os.environ[VERBOSE_ENV] = "1"
    else:
        os.environ.pop(VERBOSE_ENV, None)


def quiet_loggers() -> None:
    """Ray's Python loggers in this process: warnings and worse only (unless verbose)."""
    if verbose():
        return
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def init_ray(address: str | None = None, **kwargs: Any) -> None:
    """``ray.init`` for a lyra client or driver: workers' output and Ray's INFO lines go
    to the terminal only when verbose."""
    import ray

    loud = verbose()
    if "runtime_env" not in kwargs and _job_driver_without_env_config():
        # Inside `ray job submit --working-dir D`, the driver's cwd is D's unpacked copy;
        # Ray 2.60's eager install for the driver's own job unpacks D again *over* it
        # (overwrite=True), so the cwd vanishes under the running driver (relative paths
        # fail; torch then cannot even load). Nothing here needs the eager install.
        kwargs["runtime_env"] = {"config": {"eager_install": False}}
    kwargs.setdefault("log_to_driver", loud)
    kwargs.setdefault("logging_level", logging.INFO if loud else logging.WARNING)
    ray.init(address=address, **kwargs)
    quiet_loggers()


def _job_driver_without_env_config() -> bool:
    """A driver started by Ray's job manager whose job sets no runtime-env ``config``
    (ours would then conflict with it)."""
    raw = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    if not raw:
        return False
    try:
        env = json.loads(raw).get("runtime_env") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(env, dict) and "config" not in env


def node_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment for a node of ``lyra up --local`` (``ray start``): ``env``
    (default: this process's) with :data:`NODE_DEFAULTS` and the raylet's startup
    concurrency raised, where it sets none. The concurrency only there, as before: the
    embedded and host clusters keep Ray's own, which the suite's timings were measured
    with."""
    out = dict(os.environ if env is None else env)
    out.setdefault("RAY_worker_maximum_startup_concurrency", STARTUP_CONCURRENCY)
    return {**out, **node_env_vars(out)}


def node_env_vars(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a ``cluster_utils`` node's ``env_vars`` (added to the inherited environment)
    needs: the :data:`NODE_DEFAULTS` that ``env`` (default: this process's) lacks."""
    have = os.environ if env is None else env
    return {k: v for k, v in NODE_DEFAULTS.items() if k not in have}


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Drop what Ray prints while a cluster shuts down (unless verbose).

    WHY: tearing Serve down fails the driver's own long-poll tasks on purpose, and Ray's
    error listener prints each failure ("Task ServeController... failed"); that is noise
    on the last lines a user reads. Ray writes it to its log files all the same.
    """
    if verbose():
        yield
        return
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),
        contextlib.redirect_stderr(null),
    ):
        yield


def data_stdout() -> TextIO:
    """The real standard output, reserved for a command's data (``--json``); from here on
    everything else this process writes to file descriptor 1 goes to standard error.

    WHY: Ray's driver threads print the cluster's error messages (a raylet's warning, a
    worker's death) to stdout whatever ``log_to_driver`` says, and a line of theirs
    ahead of ``lyra status --json``'s object makes it unparsable for ``jq`` or a script.
    """
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", buffering=1)
