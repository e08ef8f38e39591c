"""The live scheduler's teams (#32) at its boundary, without Ray: the registry over a real
SQLite store (restart-safe), the admin rules, the submit-time checks, who sees which
job, and the live policy wrapper deciding as the simulator's."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.contract.errors import AuthError
from lyra_ray.model import JobSpec
from lyra_ray.model.errors import InputError
from lyra_ray.model.throughput import catalogue_throughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.policies.teams import with_teams
from lyra_ray.runtime.auth import Identity, Users
from lyra_ray.runtime.store import StateStore
from lyra_ray.runtime.teams.policy import live_team_policy
from lyra_ray.runtime.teams.registry import TeamRegistry
from lyra_ray.runtime.teams.store import TeamStore
from tests.unit.teams_helpers import cluster, job

GPUS = {"v100": 4, "k80": 4}


class Env:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = StateStore(path)
        self.users = Users(self.store)
        self.admin = self.users.add("root", True, None)["token"]
        self.bob = self.users.add("bob", False, self.admin)["token"]
        self.job_teams: dict[str, str] = {}
        self.active: list[JobSpec] = []
        self.reg = self.registry()

    def registry(self) -> TeamRegistry:
        return TeamRegistry(
            TeamStore(self.store.path),
            self.users,
            lambda: dict(GPUS),
            catalogue_throughputs(),
            self.job_teams.get,
            lambda: list(self.active),
        )


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path / "state")
    yield e
    e.store.close()


def spec(name: str, workers: int, user: str = "bob", hi: int | None = None) -> JobSpec:
    return JobSpec(
        name=name,
        total_steps=100,
        min_workers=workers,
        max_workers=hi or workers,
        user=user,
        throughput={"v100": 2.0, "k80": 1.0},
        entrypoint="m:f",
    )


def test_default_team_exists_and_users_belong_to_it(env: Env) -> None:
    assert [t["name"] for t in env.reg.all(env.admin)] == ["default"]
    assert env.reg.team_of_user("bob") == "default"
    assert env.reg.describe("default")["quota"] is None


def test_add_set_move_survive_a_restart(env: Env) -> None:
    env.reg.add("a", {"quota": "v100=2", "borrow_limit": 2, "weight": 2.0}, env.admin)
    env.reg.move("bob", "a", env.admin)
    env.reg.change("a", {"quota": "v100=3", "borrow_limit": None}, env.admin)
    again = env.registry()  # a restarted scheduler: a new connection, the same file
    a = again.describe("a")
    assert a["quota"] == {"v100": 3.0} and a["borrow_limit"] is None and a["weight"] == 2.0
    assert again.team_of_user("bob") == "a" and a["members"] == ["bob"]


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"quota": "v100=-1"}, "quota"),
        ({"quota": "v100=inf"}, "quota"),
        ({"quota": "a100=2"}, "quota"),  # the cluster has no A100
        ({"quota": "v100=5"}, "teams"),  # more V100s than the cluster has
        ({"quota_effective": math.nan}, "quota_effective"),
        ({"quota_effective": math.inf}, "quota_effective"),
        ({"quota_effective": -2.0}, "quota_effective"),
        ({"quota": "v100=1", "borrow_limit": -1}, "borrow_limit"),
        ({"quota": "v100=1", "weight": 0}, "weight"),
        ({"quota": "v100=1", "colour": "red"}, "colour"),
        ({"quota": "v100=1", "quota_effective": 2}, "quota"),
    ],
)
def test_bad_settings_name_the_field_and_change_nothing(
    env: Env, settings: dict[str, Any], field: str
) -> None:
    env.reg.add("a", {"quota": "v100=1"}, env.admin)
    before = env.reg.store.teams()
    with pytest.raises(InputError, match=field) as added:
        env.reg.add("b", settings, env.admin)
    with pytest.raises(InputError, match=field) as changed:
        env.reg.change("a", settings, env.admin)
    assert env.reg.store.teams() == before and set(env.reg.set.teams) == {"a", "default"}
    assert len(str(added.value).splitlines()) == len(str(changed.value).splitlines()) == 1


def test_unknown_team_and_user_in_no_team(env: Env) -> None:
    with pytest.raises(InputError, match="field 'team': unknown team 'nope'"):
        env.reg.move("bob", "nope", env.admin)
    with pytest.raises(InputError, match="field 'name': no user 'carol'"):
        env.reg.move("carol", "default", env.admin)
    with pytest.raises(InputError, match="field 'name': unknown team"):
        env.reg.change("nope", {"weight": 2.0}, env.admin)
    with pytest.raises(InputError, match="field 'name'"):
        env.reg.add("Bad Name", {"quota": "v100=1"}, env.admin)
    with pytest.raises(InputError, match="field 'name': the default team"):
        env.reg.remove("default", env.admin, [])
    with pytest.raises(InputError, match="field 'quota': the default team"):
        env.reg.change("default", {"quota": "v100=1"}, env.admin)


def test_management_is_for_admins(env: Env) -> None:
    with pytest.raises(AuthError, match="admins only"):
        env.reg.add("a", {"quota": "v100=1"}, env.bob)
    env.reg.add("a", {"quota": "v100=1"}, env.admin)
    for call in (
        lambda: env.reg.change("a", {"weight": 3.0}, env.bob),
        lambda: env.reg.move("bob", "a", env.bob),
        lambda: env.reg.remove("a", env.bob, []),
    ):
        with pytest.raises(AuthError):
            call()
    assert [t["name"] for t in env.reg.all(env.bob)] == ["a", "default"]  # anyone may list


def test_removing_a_team_sends_its_members_to_default(env: Env) -> None:
    env.reg.add("a", {"quota": "v100=1"}, env.admin)
    env.reg.move("bob", "a", env.admin)
    env.reg.remove("a", env.admin, [])
    assert env.reg.team_of_user("bob") == "default" and "a" not in env.reg.set.teams


def test_submit_team_rules(env: Env) -> None:
    env.reg.add("a", {"quota": "v100=2", "borrow_limit": 1}, env.admin)
    env.reg.add("b", {"quota": "v100=2"}, env.admin)
    env.reg.move("bob", "a", env.admin)
    bob, root = Identity("bob", False), Identity("root", True)
    assert env.reg.for_submit(bob, None, [spec("j", 3)]) == "a"  # 2 own + 1 borrowed
    with pytest.raises(InputError, match="field 'team': you are not in team 'b'"):
        env.reg.for_submit(bob, "b", [spec("j", 1)])
    with pytest.raises(InputError, match="field 'team': unknown team 'zz'"):
        env.reg.for_submit(bob, "zz", [spec("j", 1)])
    with pytest.raises(InputError, match=r"job 'big': field 'team': team 'a' can never give it"):
        env.reg.for_submit(bob, None, [spec("ok", 1), spec("big", 4)])
    assert env.reg.for_submit(root, "b", [spec("j", 4, user="root")]) == "b"  # no limit


def test_config_is_applied_once_per_distinct_config(env: Env) -> None:
    raw = {"teams": {"a": {"quota": "v100=2"}}, "users": {"bob": "a"}}
    env.reg.apply_config(raw)
    env.reg.change("a", {"weight": 5.0}, env.admin)
    env.registry().apply_config(raw)  # a restarted actor, same config: admins' change kept
    assert env.registry().describe("a")["weight"] == 5.0
    env.reg.apply_config({**raw, "teams": {"a": {"quota": "v100=1"}}})
    assert env.reg.describe("a")["quota"] == {"v100": 1.0}
    with pytest.raises(InputError, match=r"field 'teams\.c\.quota'"):
        env.reg.apply_config({"teams": {"c": {"quota": "v100=-1"}}})


def test_teammates_see_but_do_not_touch() -> None:
    alice = Identity("alice", False, team="a")
    assert alice.may_see("bob", "a") and not alice.may_touch("bob")
    assert not alice.may_see("carol", "b")
    assert not Identity("x", False, team="default").may_see("y", "default")
    assert Identity("root", True).may_touch("bob")


def test_live_policy_is_the_simulators_wrapper(env: Env) -> None:
    """No limited team: the policy's own answer; teams: the wrapper's, quota reasons too."""
    jobs = [job("a1", "bob", 2, 4, running=4, started=0.0), job("b1", "root", 2)]
    snap = cluster(jobs, v100=4)
    inner = get_policy("lyra")
    live = live_team_policy(inner, env.reg.for_snapshot)
    assert live.name == inner.name
    assert live.allocate(snap).workers == get_policy("lyra").allocate(snap).workers
    env.reg.add("a", {"quota": "v100=2"}, env.admin)
    env.reg.add("b", {"quota": "v100=2"}, env.admin)
    env.job_teams.update({"a1": "a", "b1": "b"})
    got = live.allocate(snap)
    sim = with_teams(get_policy("lyra"), env.reg.for_snapshot(snap)).allocate(snap)
    assert got.workers == sim.workers
    assert got.workers["a1"] == ("v100", 2) and got.workers["b1"] == ("v100", 2)  # a1 shrank
    standing = {s.name: s for s in env.reg.standings(snap)}
    assert standing["a"].borrowed == {"v100": 2.0} and standing["b"].lent == {"v100": 2.0}


def test_the_reference_type_is_a_setting_kept_with_the_teams(env: Env) -> None:
    env.reg.add("a", {"quota_effective": 2}, env.admin)
    got = env.reg.settings()
    assert got["reference"] == "auto" and got["reference_in_force"] == "k80"  # 4 = 4: a-z
    assert env.reg.set_reference("v100", env.admin)["reference_in_force"] == "v100"
    again = env.registry()  # a restarted scheduler reads it back
    assert again.set.reference == "v100" and again.settings()["reference"] == "v100"
    with pytest.raises(InputError, match=r"field 'reference'.*'a100' is not in the cluster"):
        env.reg.set_reference("a100", env.admin)
    with pytest.raises(AuthError):
        env.reg.set_reference("k80", env.bob)
    assert env.reg.set_reference("auto", env.admin)["reference"] == "auto"
    snap = cluster([job("a1", "bob", 1, running=1)], v100=4, k80=4)
    env.job_teams["a1"] = "a"
    (a,) = [s for s in env.reg.standings(snap) if s.name == "a"]
    assert a.reference == "k80"


def test_the_configs_reference_and_enforcement_reach_the_policy(env: Env) -> None:
    raw = {"teams": {"a": {"quota_effective": 2}}, "reference": "v100", "enforce": "pin"}
    env.reg.apply_config(raw)
    snap = cluster([], v100=4, k80=4)
    live = env.reg.for_snapshot(snap)
    assert (live.reference, live.enforce) == ("v100", "pin")
    assert env.registry().set.reference == "v100"  # kept across a restart


def test_effective_guarantees_are_checked_against_the_capacity_in_reference_units(
    env: Env,
) -> None:
    """Reference k80 (the most common type, by name among equals); the queued and
    running jobs run twice as fast on a v100, so the cluster holds 4 x 2 + 4 = 12."""
    env.active.append(JobSpec("q", 10.0, 1, 1, user="bob", throughput={"v100": 2.0, "k80": 1.0}))
    env.reg.add("a", {"quota_effective": 8}, env.admin)
    with pytest.raises(InputError, match=r"effective quotas sum to 13; the cluster holds 12"):
        env.reg.add("b", {"quota_effective": 5}, env.admin)
    assert set(env.reg.set.teams) == {"a", "default"}  # nothing written
    env.reg.add("b", {"quota_effective": 4}, env.admin)


def test_a_node_leaving_reports_an_oversubscribed_cluster(env: Env) -> None:
    env.reg.add("a", {"quota": "v100=2"}, env.admin)
    env.reg.add("b", {"quota": "v100=2"}, env.admin)
    assert env.reg.check_capacity(cluster([], v100=4)) is None
    why = env.reg.check_capacity(cluster([], v100=3))  # a V100 server left
    assert why == "quotas of v100 sum to 4 GPUs; the cluster has 3"
    assert env.reg.settings()["oversubscribed"] == why
    assert env.reg.check_capacity(cluster([], v100=4)) is None
    assert env.reg.settings()["oversubscribed"] is None
