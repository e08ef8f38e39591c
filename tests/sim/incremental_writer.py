"""The live cycle with the incremental store, for ``test_incremental_store.py``; run as a
module it is the writer that test SIGKILLs in the middle of an incremental commit.

    python -m tests.sim.incremental_writer STATE_DIR POLICY AFTER

The writer runs the ``loan`` workload of ``test_restart_decides_alike`` (elastic jobs,
loans to an inference pool) through :class:`~lyra_ray.runtime.cycle.LiveCycle` and a
real SQLite store, as ``test_one_loop`` does. At the first commit of a cycle after
``AFTER`` commits it stops inside the transaction, once the job rows and parts are
written and before the inbox and archive rows and the COMMIT, prints ``mid N`` (N: that
commit's number) and sleeps until it is killed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.archive import JobArchive
from lyra_ray.runtime.cycle import Inbox, LiveCycle, LiveStore
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import SchedulerCore
from tests.sim.test_one_loop import DemandReplay, FluidExecutor, SubmittingClock, _ids
from tests.sim.test_restart_decides_alike import WORKLOADS

DEMAND = [(0.0, 1), (900.0, 3), (2_400.0, 0)]


class CountingStore(LiveStore):
    """A LiveStore that numbers its saves and knows whether one is a cycle's first."""

    saves = 0
    first_of_cycle = False

    def commit(self, core: SchedulerCore, cycle: Any) -> None:
        self.first_of_cycle = True
        try:
            super().commit(core, cycle)
        finally:
            self.first_of_cycle = False

    def save(self, core: SchedulerCore, consumed: list[int]) -> None:
        self.saves += 1
        super().save(core, consumed)
        self.first_of_cycle = False


class StoppingClock(SubmittingClock):
    """Ends the run once ``live`` has made ``stop_after`` saves (checked between cycles)."""

    def __init__(self, *args: Any, live: CountingStore, stop_after: int | None) -> None:
        super().__init__(*args)
        self.live, self.stop_after = live, stop_after

    def next(self, wakeup: float | None) -> float | None:
        if self.stop_after is not None and self.live.saves >= self.stop_after:
            return None
        return super().next(wakeup)


def build(
    store: StateStore, policy: str, stop_after: int | None = None
) -> tuple[LiveCycle, StoppingClock, CountingStore, SchedulerCore]:
    """The live cycle over ``store``, as ``test_one_loop`` wires it."""
    nodes, specs, model, _ = WORKLOADS["loan"]()
    core = SchedulerCore(get_policy(policy), model, round_s=120.0)
    executor = FluidExecutor(nodes, model)
    ids = _ids(specs)
    for jid, spec in zip(ids, specs, strict=True):
        executor.register(jid, spec)
    serving = DemandReplay(DEMAND)
    live = CountingStore(store, Inbox(store, core), executor, serving, JobArchive(store))
    cycle = LiveCycle(core, live, executor, serving)
    arrivals = [(s.arrival_s, jid, s) for jid, s in zip(ids, specs, strict=True)]
    clock = StoppingClock(
        store, arrivals, executor, serving, core, live=live, stop_after=stop_after
    )
    return cycle, clock, live, core


def whole_state(live: LiveStore, core: SchedulerCore) -> dict[str, Any]:
    """What the whole-state store would hold now (as :meth:`LiveStore.save` builds it)."""
    return {
        "core": core.to_state(),
        "runtime": live.executor.to_state(),
        "serving": live.serving.to_state(),
        "reasons": live.reasons,
        "restarts": live.restarts,
    }


class HangingStore(StateStore):
    """Hangs inside the transaction of the first cycle-opening commit after ``after``."""

    def __init__(self, state_dir: str, after: int) -> None:
        super().__init__(state_dir)
        self.after = after
        self.live: CountingStore | None = None

    def _consume_and_archive(self, consumed: Sequence[int], rows: list[tuple[str, str]]) -> None:
        live = self.live
        if live is not None and live.saves > self.after and live.first_of_cycle:
            print(f"mid {live.saves}", flush=True)
            time.sleep(600)  # killed here: jobs and parts written, nothing committed
        super()._consume_and_archive(consumed, rows)


def main(state_dir: str, policy: str, after: int) -> None:
    store = HangingStore(state_dir, after)
    cycle, clock, live, _ = build(store, policy)
    store.live = live
    cycle.run(clock)
    print("end", flush=True)  # never reached while a cycle commits after ``after``


if __name__ == "__main__":
    Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
