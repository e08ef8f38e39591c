"""Calls from the scheduler's cycle to the services' ingresses, which never hold the cycle.

The cycle runs under the lock that every view of the scheduler takes (``overview``,
``status``). An ingress that is still starting, or is being redeployed, answers only
once its replica runs: a fresh MoE ingress under a busy host took minutes. A call that
waited for it held the lock the whole time, and ``lyra moe serve``'s own ``overview``
timed out behind it.

So a call is sent once and left in flight: each cycle looks at it for at most a short
wait (``wait_s``), takes its answer once it has come, and gives up on it only after
``give_up_s``. Most answers come within the wait of the cycle that asked (an ingress
that runs answers in milliseconds), so a running service is followed as closely as
before; one that is starting costs each cycle the wait, not the whole timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray import serve

from lyra_ray.serving import apps

log = logging.getLogger(__name__)

WAIT_S = 1.0
"""How long one look at a call in flight may hold the cycle."""
GIVE_UP_S = 30.0
"""How long a call may stay unanswered before it counts as failed and may be sent again."""


def ingress(name: str) -> Any:
    return serve.get_app_handle(apps.ingress_app_name(name))


@dataclass
class InFlight:
    response: Any
    args: tuple[Any, ...]
    sent_at: float


class Pending:
    """The call has not been answered yet; look again at the next cycle."""


PENDING = Pending()

Key = tuple[str, ...]
"""A call's key: the service, the method, and what the caller adds (a server)."""


class IngressCalls:
    """Calls in flight to the ingresses, one per key (a service, a method, and what the
    caller adds: a server for ``inflight_on``)."""

    def __init__(
        self,
        handle: Callable[[str], Any] = ingress,
        wait_s: float = WAIT_S,
        give_up_s: float = GIVE_UP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.handle, self.wait_s, self.give_up_s, self.clock = handle, wait_s, give_up_s, clock
        self.flying: dict[Key, InFlight] = {}

    def send(self, key: Key, name: str, method: str, *args: Any) -> None:
        """Send ``method(*args)`` to ``name``'s ingress, unless the same call is already
        in flight under ``key``; a call with other arguments replaces it (its answer, if
        it still comes, is not read). Raises what getting the handle raises (no such
        application: it is being deployed or deleted)."""
        old = self.flying.get(key)
        if old is not None and old.args == args:
            return
        response = getattr(self.handle(name), method).remote(*args)
        self.flying[key] = InFlight(response, args, self.clock())

    def collect(self, key: Key, deadline: float | None = None) -> Any:
        """The answer of the call under ``key``: its value, :data:`PENDING` while it is
        unanswered, or raises what it raised (``TimeoutError`` once it stayed unanswered
        ``give_up_s``). Waits at most until ``deadline`` (``clock()`` time; default: one
        ``wait_s`` from now). A key with no call in flight raises ``KeyError``."""
        call = self.flying[key]
        wait = max(0.0, (self.deadline() if deadline is None else deadline) - self.clock())
        try:
            value = call.response.result(timeout_s=wait)
        except TimeoutError as e:
            if self.clock() - call.sent_at < self.give_up_s:
                return PENDING
            del self.flying[key]
            call.response.cancel()
            raise TimeoutError(f"no answer in {self.give_up_s:.0f} s") from e
        except BaseException:
            del self.flying[key]
            raise
        del self.flying[key]
        return value

    def deadline(self) -> float:
        """One wait from now (``clock()`` time): the bound on calls read together."""
        return self.clock() + self.wait_s

    def sent_at(self, key: Key) -> float:
        """When (``clock()`` time) the call in flight under ``key`` was sent."""
        return self.flying[key].sent_at

    def in_flight(self, key: Key) -> tuple[Any, ...] | None:
        """The arguments of the call in flight under ``key``, None if there is none."""
        call = self.flying.get(key)
        return None if call is None else call.args

    def discard(self, key: Key) -> None:
        """Forget the call under ``key``, if any: its answer, should it come, is not read."""
        self.flying.pop(key, None)

    def drop(self, name: str) -> None:
        """Forget every call to ``name`` (the service was removed)."""
        for key in [k for k in self.flying if k[0] == name]:
            del self.flying[key]
