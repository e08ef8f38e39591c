"""One loop, both drivers (issue #30, item 1): the same workload through the simulator and
through the live scheduler's own cycle code gets the same decisions.

The live side is :class:`lyra_ray.runtime.cycle.LiveCycle` as the actor wires it: its
SQLite inbox (jobs are queued there at their arrival, as the SDK queues them), its
store (every cycle committed to a real SQLite file, terminal jobs archived), its sink
order. Only Ray is replaced: the executor by the simulator's fluid job model, the
serving pool by a replay of the same demand series, and the wall clock by a virtual one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lyra_ray import model as m
from lyra_ray.model import JobSpec, Node
from lyra_ray.model.state import spec_to_dict
from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.archive import JobArchive
from lyra_ray.runtime.cycle import Inbox, LiveCycle, LiveStore
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import Folded, SchedulerCore
from lyra_ray.sim.runtime import SimRuntime
from lyra_ray.sim.simulator import Simulator
from tests.sim.test_restart_decides_alike import GAVEL, WORKLOADS

Decisions = list[tuple[float, tuple[m.Action, ...]]]


def _logged(core: SchedulerCore, log: Decisions) -> None:
    decide = core.decide

    def logged(folded: Folded) -> m.Decision:
        out = decide(folded)
        if out.actions:
            log.append((core.now, out.actions))
        return out

    core.decide = logged  # type: ignore[method-assign]


class FluidExecutor(SimRuntime):
    """Ray Train's place in the live cycle: the simulator's fluid job model, which also
    reports the nodes (as the live inventory does) on its first poll."""

    reports_progress: ClassVar[bool] = True

    def __init__(self, nodes: Sequence[Node], model: m.ThroughputModel) -> None:
        super().__init__(model)
        self.pending_nodes = list(nodes)
        self.dirty = False

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        ups: list[m.Event] = [m.NodeUp(n) for n in self.pending_nodes]
        self.pending_nodes = []
        return ups + super().collect(now, earlier, progress)

    def forget(self, job_id: str) -> list[tuple[float, str, int, dict[str, Any]]]:
        return []

    def generation(self, job_id: str) -> int:
        return 0  # the fluid model has no generations: every run is the job's first

    def to_state(self) -> dict[str, Any]:
        return {"runs": sorted(self.runs)}


class DemandReplay:
    """Ray Serve's place: the serving pool reports the demand series as it comes due."""

    reports_progress: ClassVar[bool] = False

    def __init__(self, demand: Sequence[tuple[float, int]]) -> None:
        self.demand = sorted(demand)

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        due = [m.ServingDemand(s) for t, s in self.demand if t <= now]
        self.demand = [(t, s) for t, s in self.demand if t > now]
        return due

    def apply(self, actions: Sequence[m.Action]) -> None:
        return None

    def to_state(self) -> dict[str, Any]:
        return {"demand_left": len(self.demand)}


class SubmittingClock:
    """A virtual clock that queues each job in the SQLite inbox at its arrival, as the
    SDK would, and jumps to the next arrival, completion, demand change or wakeup."""

    def __init__(
        self,
        store: StateStore,
        arrivals: list[tuple[float, str, JobSpec]],
        executor: FluidExecutor,
        serving: DemandReplay,
        core: SchedulerCore,
    ) -> None:
        self.store, self.arrivals, self.executor = store, sorted(arrivals), executor
        self.serving, self.core = serving, core
        self.first = True

    def next(self, wakeup: float | None) -> float | None:
        times = [x for x in (wakeup, self.executor.next_completion()) if x is not None]
        times += [a[0] for a in self.arrivals[:1]] + [d[0] for d in self.serving.demand[:1]]
        if self.first:
            times.append(0.0)
            self.first = False
        if not times or (not self.arrivals and not self.core.active()):
            return None
        t = min(times)
        while self.arrivals and self.arrivals[0][0] <= t:
            _, jid, spec = self.arrivals.pop(0)
            self.store.enqueue("submit", jid, spec_to_dict(spec))
        return t


def _ids(specs: Sequence[JobSpec]) -> list[str]:
    return [f"{i:06d}-{s.name}" if s.name != str(i) else f"{i:06d}" for i, s in enumerate(specs)]


def _live(
    tmp: Path, workload: str, policy: str, demand: list[tuple[float, int]]
) -> tuple[Decisions, SchedulerCore, StateStore]:
    nodes, specs, model, _ = WORKLOADS[workload]()  # fresh: a throughput model learns
    core = SchedulerCore(get_policy(policy), model, round_s=120.0)
    log: Decisions = []
    _logged(core, log)
    store = StateStore(tmp)
    executor = FluidExecutor(nodes, model)
    for jid, spec in zip(_ids(specs), specs, strict=True):
        executor.register(jid, spec)
    serving = DemandReplay(demand)
    live = LiveStore(store, Inbox(store, core), executor, serving, JobArchive(store))
    cycle = LiveCycle(core, live, executor, serving)
    arrivals = [(s.arrival_s, jid, s) for jid, s in zip(_ids(specs), specs, strict=True)]
    cycle.run(SubmittingClock(store, arrivals, executor, serving, core))
    return log, core, store


CASES = [
    ("loan", "lyra"),
    ("loan", "max_min_fairness_perf"),
    ("loan", "fifo"),
    ("gavel", "max_min_fairness_packed"),
    ("gavel", "finish_time_fairness_perf"),
]


@pytest.mark.parametrize(("workload", "policy"), CASES)
def test_the_live_cycle_decides_as_the_simulator(
    tmp_path: Path, workload: str, policy: str
) -> None:
    if workload == "gavel" and not GAVEL.exists():
        pytest.skip("../shared/data/gavel is absent")
    nodes, specs, model, _ = WORKLOADS[workload]()
    demand = [(0.0, 1), (900.0, 3), (2_400.0, 0)] if workload == "loan" else []
    sim = Simulator(nodes, get_policy(policy), model, round_s=120.0, serving_demand=demand)
    expected: Decisions = []
    _logged(sim.core, expected)
    result = sim.run(specs)
    assert result.summary["completed_jobs"] == len(specs)

    got, core, store = _live(tmp_path, workload, policy, demand)
    assert got == expected
    assert len(got) > 5
    # every job went through the inbox and ended in the archive, not in the core
    assert store.pending() == []
    assert core.jobs == {}
    assert JobArchive(store).count() == len(specs)
