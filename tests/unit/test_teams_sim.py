"""``lyra simulate --teams``: the flag's checks, and a team file that limits nobody
changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.sim.workload import SimSettings, assemble

TRACE = str(Path(__file__).resolve().parents[2] / "lyra_ray" / "data" / "demo_jobs.yaml")
CLUSTER = "v100=8,p100=8,k80=16"


def run(teams: str | None, policy: str = "fifo_nonpreemptive") -> list[dict[str, object]]:
    s = SimSettings(trace=TRACE, cluster=CLUSTER, gpus_per_node=4, policy=policy, teams=teams)
    w = assemble(s)
    return w.simulator.run(w.specs).jobs


@pytest.mark.parametrize("policy", ["fifo_nonpreemptive", "lyra"])
def test_teams_that_limit_nobody_leave_every_decision_alone(tmp_path: Path, policy: str) -> None:
    p = tmp_path / "teams.yaml"
    p.write_text("teams:\n  default: {}\n  free: {}\nusers: {alice: free}\n")
    assert run(str(p), policy) == run(None, policy)


def test_quotas_change_the_schedule_and_every_job_still_finishes(tmp_path: Path) -> None:
    p = tmp_path / "teams.yaml"
    p.write_text(
        "teams:\n  a: {quota: 'v100=4,k80=8', borrow_limit: 0}\n  b: {quota: 'v100=4,p100=8'}\n"
        "jobs: {cyclegan-0: a, resnet18-1: a, resnet50-2: b, bert-3: b, resnet50-4: a}\n"
    )
    jobs = run(str(p))
    assert all(j["status"] == "finished" for j in jobs)
    assert jobs != run(None)


def test_bad_teams_file_names_the_flag_and_the_field(tmp_path: Path) -> None:
    p = tmp_path / "teams.yaml"
    p.write_text("teams:\n  a: {quota: 'a100=4'}\n")
    with pytest.raises(InputError, match=r"^--teams: .*field 'teams.a.quota'.*a100"):
        run(str(p))


def test_effective_guarantees_beyond_the_traces_capacity_in_reference_units(
    tmp_path: Path,
) -> None:
    """v100=8,p100=8,k80=16: the reference is the k80 (the most common type); the demo's
    catalogue jobs run several times faster on the others: the cluster holds about 68
    k80s' worth of them, so 60 fits and 1,000 does not."""
    p = tmp_path / "teams.yaml"
    p.write_text("teams:\n  a: {quota_effective: 1000}\n")
    with pytest.raises(InputError, match=r"^--teams: .*field 'teams': effective quotas sum"):
        run(str(p))
    p.write_text("teams:\n  a: {quota_effective: 30, lend_limit: 8}\n  b: {quota_effective: 30}\n")
    assert all(j["status"] == "finished" for j in run(str(p)))
