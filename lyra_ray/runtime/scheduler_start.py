"""Starting the scheduler actor from a driver: ``lyra up``, the demo, the tests.

WHY apart from the actor (:mod:`lyra_ray.runtime.scheduler`): this runs in the caller's
process and owns nothing of the actor's state; it creates (or finds by name) the detached
actor and waits until it answers, telling a saved state this lyra may not resume
(:class:`SavedStateError`, one line) from a scheduler that is only restarting.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import ray

from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.runtime.saved_state import SavedStateError
from lyra_ray.runtime.scheduler import GlobalScheduler


def start_scheduler(config: SchedulerConfig | Mapping[str, Any] | None = None) -> Any:
    """Create (or find) the detached scheduler actor on the head node; wait until ready.

    A mapping is checked here (:meth:`SchedulerConfig.from_dict`); a
    :class:`SchedulerConfig` was checked where it was made, and travels as it is."""
    cfg = config if isinstance(config, SchedulerConfig) else SchedulerConfig.from_dict(config)
    actor = GlobalScheduler.options(  # type: ignore[attr-defined]
        name=SCHEDULER_ACTOR,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={"node:__internal_head__": 0.001},
    ).remote(cfg)
    deadline = time.monotonic() + RESTARTING_WAIT_S
    while True:
        try:
            ray.get(actor.ping.remote())
            return actor
        except ray.exceptions.ActorUnavailableError:
            # The actor found by name is restarting (a head brought back with its GCS
            # state restarts the detached scheduler; found under a CPU hog, where that
            # took longer than the ping): it answers once its __init__ has run.
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
        except ray.exceptions.RayActorError as e:
            refusal = _refusal(e)
            if refusal is None:
                raise
            raise SavedStateError(refusal) from None


RESTARTING_WAIT_S = 300.0
"""How long :func:`start_scheduler` waits for a scheduler actor that is restarting."""


def _refusal(e: BaseException) -> str | None:
    """The one line of a :class:`SavedStateError` that ended the actor's creation. Ray
    reports an error raised in ``__init__`` as an ActorDiedError whose text ends with the
    error's type and message (the actor is then dead for good, and its name free)."""
    marker = f"{SavedStateError.__name__}: "
    text = str(e)
    return text.rsplit(marker, 1)[1].splitlines()[0].strip() if marker in text else None
