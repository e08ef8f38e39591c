"""Teams inside the policy on whole simulated traces (issue #42): where no quota binds,
every decision is the inner policy's own, for every registered policy.

Two checks. (1) A team file whose rows exist and are checked at every decision but can
never bind (one limited team holding every job, guaranteed one V100, borrowing without
bound): whole reports equal to the policy's without teams, every registered policy, on
the demo trace and on Gavel's ``max_min_fairness.trace`` (its first 48 jobs). (2) Two
teams whose quotas do bind now and then: at every decision where the inner policy's own
answer (the same snapshot, teams as its entities, no bound checked) breaks no row, the
wrapper's answer is that answer.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.policies.base import available_policies
from lyra_ray.policies.teams import TeamPolicy
from lyra_ray.policies.teams.bounds import claim, pool_capacity
from lyra_ray.policies.teams.fit import sizes, uses
from lyra_ray.sim.workload import SimSettings, assemble

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "lyra_ray" / "data" / "demo_jobs.yaml")
SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT / ".." / "shared" / "data"))
GAVEL = SHARED / "gavel"
LOOSE = "teams:\n  all: {quota: 'v100=1', borrow_limit: 1000000}\nusers: {default: all}\n"


def simulate(settings: SimSettings) -> tuple[list[dict[str, Any]], Any]:
    w = assemble(settings)
    return w.simulator.run(w.specs).jobs, w.simulator


def demo(policy: str, teams: str | None) -> SimSettings:
    return SimSettings(
        trace=DEMO, cluster="v100=8,p100=8,k80=16", gpus_per_node=4, policy=policy, teams=teams
    )


def gavel(policy: str, teams: str | None) -> SimSettings:
    trace = GAVEL / "traces" / "max_min_fairness.trace"
    if not trace.exists():
        pytest.skip(f"{trace} not found")
    return SimSettings(
        trace=str(trace),
        cluster="v100=4,p100=4,k80=8",
        policy=policy,
        teams=teams,
        gavel_table=str(GAVEL / "simulation_throughputs.json"),
        max_jobs=48,
    )


@pytest.mark.parametrize("trace", [demo, gavel], ids=["demo", "gavel"])
@pytest.mark.parametrize("policy", sorted(available_policies()))
def test_rows_that_never_bind_leave_a_whole_trace_alone(
    tmp_path: Path, policy: str, trace: Any
) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text(LOOSE)
    alone, _ = simulate(trace(policy, None))
    inside, sim = simulate(trace(policy, str(teams)))
    wrapper = sim.core.decider.policy
    assert isinstance(wrapper, TeamPolicy) and wrapper.last.bounds is not None
    assert inside == alone


class Checked(TeamPolicy):
    """The wrapper, and at every decision the inner policy's own answer beside it: where
    that answer breaks no row, the wrapper must give exactly it."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.same = self.bound = 0

    def allocate(self, snap: ClusterSnapshot) -> Allocation:
        bounds = claim(snap, self.teams).bounds(pool_capacity(snap))
        saved = self.inner.to_state()
        own = self.inner.allocate(
            dataclasses.replace(snap, team_bounds=bounds, entity_weights=self.teams.weights())
        )
        self.inner.load_state(saved)
        got = super().allocate(snap)
        broken = bounds.violated(bounds.tally(uses(own, sizes(snap))), bool(own.fractions))
        if own.lend - snap.lent_nodes:
            broken = ["capacity moved"]  # type: ignore[list-item]
        if broken:
            self.bound += 1
        else:
            assert dataclasses.replace(got, waiting={}) == dataclasses.replace(own, waiting={})
            self.same += 1
        return got


TWO = (
    "teams:\n  a: {quota: 'v100=4,p100=4,k80=4'}\n  b: {quota: 'v100=2,p100=2,k80=8'}\njobs: {%s}\n"
)


@pytest.mark.parametrize(
    "policy",
    [
        "lyra",
        "fifo_nonpreemptive",
        "fifo_perf",
        "max_min_fairness_perf",
        "max_min_fairness_water_filling_perf",
        "finish_time_fairness_perf",
        "max_min_fairness_packed",
    ],
)
def test_at_every_decision_no_bound_binding_means_the_inner_answer(
    tmp_path: Path, policy: str
) -> None:
    import yaml

    names = [j["name"] for j in yaml.safe_load(Path(DEMO).read_text())["jobs"]]
    teams = tmp_path / "teams.yaml"
    teams.write_text(TWO % ", ".join(f"{n}: {'ab'[i % 2]}" for i, n in enumerate(names)))
    w = assemble(demo(policy, str(teams)))
    wrapper = w.simulator.core.decider.policy
    assert isinstance(wrapper, TeamPolicy)
    checked = Checked(wrapper.inner, wrapper.teams)
    w.simulator.core.decider.policy = checked
    report = w.simulator.run(w.specs)
    assert all(j["status"] == "finished" for j in report.jobs)
    assert checked.same > 0 and checked.bound > 0  # both kinds of decision were met
