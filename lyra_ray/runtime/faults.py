"""A test-only fault hook: crash the scheduler at a chosen point of its cycle.

The reliability campaign (``tests/chaos``, issue #17) must kill the scheduler *between*
committing a decision and applying it, and between applying it and committing the runs
it started — moments a kill from outside hits only by luck. The hook is off unless the
cluster's environment sets ``LYRA_FAULT_INJECTION=1``; armed, it ends the process at
that point of the next cycle with actions, as a crash there would. The restarted actor
starts unarmed. In the loop it costs one comparison per cycle that has actions.
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)

FAULT_ENV = "LYRA_FAULT_INJECTION"
FAULT_POINTS = ("after_persist", "after_apply")


class FaultHook:
    def __init__(self) -> None:
        self.armed: str | None = None

    def arm(self, point: Any) -> dict[str, Any]:
        if os.environ.get(FAULT_ENV) != "1":
            return {"ok": False, "error": f"fault injection is off: set {FAULT_ENV}=1"}
        if point not in FAULT_POINTS:
            return {"ok": False, "error": f"field 'point': one of {FAULT_POINTS}, got {point!r}"}
        self.armed = point
        return {"ok": True, "point": point}

    def at(self, point: str) -> None:
        if self.armed == point:
            log.warning("fault injection: exiting at %s", point)
            os._exit(1)
