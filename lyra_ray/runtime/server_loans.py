"""Each inference server's place in its loan: serving, draining, lent or reclaiming.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which carries out what a state
asks for on Ray Serve (routing, deleting and deploying a server's copies). This keeps
the states, their transitions and the record of lends and reclaims, apart from Serve,
because that is what a restart must get back exactly (a server lent before a crash is
lent after it) and what the operator's page and the metrics read:

- ``SERVING`` -> ``DRAINING`` on a Lend: no new requests; the pool deletes the
  server's copies once nothing is in flight there (``deleting``), then it is ``LENT``.
- ``LENT`` or ``DRAINING`` -> ``RECLAIMING`` on a Reclaim; a draining server whose
  copies were not yet being deleted goes straight back to ``SERVING``.
- ``RECLAIMING`` -> ``SERVING`` once its copies run again; the reclaim's latency is
  recorded from the demand's rise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

SERVING, DRAINING, LENT, RECLAIMING = "serving", "draining", "lent", "reclaiming"
KEPT_RECORDS = 1000
"""Lends and reclaims kept in the saved state: enough for the page's history, bounded so
that a long-lived scheduler's state does not grow without end."""


class ServerLoans:
    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.deleting: set[str] = set()
        """Draining servers whose copies are being deleted."""
        self.reclaim_started: dict[str, float] = {}
        self.reclaims: list[dict[str, Any]] = []
        """Per finished reclaim: the server, its latency from the demand rise, and from
        the Reclaim action."""
        self.lends: list[dict[str, Any]] = []

    def to_state(self) -> dict[str, Any]:
        return {
            "state": dict(sorted(self.state.items())),
            "reclaims": self.reclaims[-KEPT_RECORDS:],
            "lends": self.lends[-KEPT_RECORDS:],
        }

    def load_state(self, saved: Mapping[str, Any]) -> None:
        self.state = dict(saved.get("state", {}))
        self.reclaims = list(saved.get("reclaims", []))
        self.lends = list(saved.get("lends", []))

    # ------------------------------------------------------------------ servers

    def joined(self, node: str) -> bool:
        """A server came up: a new one starts out serving (True); one a restart already
        knows keeps its state (False)."""
        if node in self.state:
            return False
        self.state[node] = SERVING
        return True

    def left(self, node: str) -> None:
        self.state.pop(node, None)
        self.deleting.discard(node)

    def is_lent(self, node: str) -> bool:
        return self.state.get(node) == LENT

    def taking_requests(self) -> int:
        """Servers serving or on their way back to it: where a new service is counted."""
        return sum(1 for st in self.state.values() if st in (SERVING, RECLAIMING))

    # ------------------------------------------------------------------ transitions

    def lend(self, node: str, now: float, copies_exist: Callable[[], bool]) -> bool:
        """The core lent ``node``. Returns whether its routing changed (it was taking
        requests and now drains). A server still reclaiming whose copies never came back
        is lent at once: there is nothing to drain."""
        prev = self.state.get(node)
        rerouted = False
        if prev == RECLAIMING and not copies_exist():
            self.state[node] = LENT
        elif prev in (SERVING, RECLAIMING):
            self.state[node] = DRAINING
            self.lends.append({"node": node, "at": now})
            rerouted = True
        log.info("lend %s: %s -> %s", node[:12], prev, self.state.get(node))
        return rerouted

    def reclaim(self, node: str, now: float) -> bool:
        """The core reclaimed ``node``. Returns whether its routing changed: a draining
        server whose copies were not yet being deleted takes requests again at once."""
        prev = self.state.get(node)
        rerouted = False
        if prev == DRAINING and node not in self.deleting:
            self.state[node] = SERVING
            rerouted = True
        elif prev in (LENT, DRAINING):
            self.state[node] = RECLAIMING
            self.reclaim_started[node] = now
        # WHY: ``deleting`` belongs to one drain. Once left behind by a drain cut short,
        # the server's next drain skipped the wait for its requests and the delete, and
        # waited for copies that nobody deleted: draining until the next reclaim, never
        # lent again (CI's lost-server failure of 2026-12-01, docs/testing.md).
        self.deleting.discard(node)
        log.info("reclaim %s: %s -> %s", node[:12], prev, self.state.get(node))
        return rerouted

    def deleting_copies(self, node: str) -> None:
        self.deleting.add(node)

    def drained(self, node: str) -> None:
        """Its copies are gone: training may use it."""
        self.deleting.discard(node)
        self.state[node] = LENT
        log.info("server %s drained: lent", node[:12])

    def reclaimed(self, node: str, now: float, rise_at: float | None) -> bool:
        """Its copies run again: it serves. Records the reclaim's latency from the demand's
        rise (``rise_at``, else the Reclaim action). Returns whether any other server is
        still reclaiming."""
        self.state[node] = SERVING
        began = self.reclaim_started.pop(node, now)
        rise = rise_at if rise_at is not None else began
        self.reclaims.append(
            {
                "node": node,
                "at": now,
                "latency_s": now - min(rise, began),
                "since_action_s": now - began,
            }
        )
        log.info("server %s serving again (%.1f s after the demand rose)", node[:12], now - rise)
        return any(st == RECLAIMING for st in self.state.values())
