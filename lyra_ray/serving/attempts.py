"""Requests' attempts in flight on each server, so that a lost server's end at once.

WHY: a drain lets a server's requests finish; a *lost* server (its machine gone) never
answers them. lyra's ingress forwards through Serve's proxy, and Serve's router holds a
request for a copy whose only replica died until that replica comes back: it never does
(the copy was pinned to the lost server and the pool deletes it), so the request waited
out its client's own timeout (90 s in the serving chaos test, against ~40 s for the
capacity to be back). When the pool learns that a server is gone it tells the ingress,
which ends every attempt still on it: the caller then resends it where the retry rule
allows (:mod:`lyra_ray.serving.retry`) or answers at once.

No Ray here: the ingress's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ServerLost(RuntimeError):
    """The server an attempt was on is gone: its answer will never come."""

    def __init__(self, node: str) -> None:
        super().__init__(f"server {node[:12]} was lost with the request on it")
        self.node = node


class Attempts:
    """Attempts in flight, by server. One per ingress replica, on its event loop."""

    def __init__(self) -> None:
        self._on: dict[str, set[asyncio.Task[Any]]] = {}
        self._ended: set[asyncio.Task[Any]] = set()

    async def run(self, node: str, attempt: Coroutine[Any, Any, T]) -> T:
        """``attempt``'s result; raises :class:`ServerLost` if :meth:`lost` ended it.
        Cancelling the caller (its client left) cancels the attempt too."""
        task = asyncio.ensure_future(attempt)
        self._on.setdefault(node, set()).add(task)
        try:
            return await task
        except asyncio.CancelledError:
            if task in self._ended:
                raise ServerLost(node) from None
            raise
        finally:
            self._ended.discard(task)
            tasks = self._on.get(node)
            if tasks is not None:
                tasks.discard(task)
                if not tasks:
                    del self._on[node]

    def lost(self, node: str) -> int:
        """End every attempt on ``node``; returns how many."""
        ended = 0
        for task in self._on.get(node, ()):
            if not task.done():
                self._ended.add(task)
                task.cancel()
                ended += 1
        return ended

    def on(self, node: str) -> int:
        """Attempts in flight on ``node``."""
        return len(self._on.get(node, ()))
