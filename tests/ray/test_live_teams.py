"""Teams on a real cluster (#32): borrowing, reclaim by shrinking, who sees what, a kill.

Teams A and B are each guaranteed 2 of the cluster's 4 V100s. Alice (A) runs an elastic
job of 2-4 workers: it borrows B's idle pair and runs at 4. Carol, her teammate, sees
the job in ``lyra status`` but may not cancel it; Dave (default team) sees neither
team's jobs. The scheduler actor is killed while A borrows: teams, memberships, the
job's team and its borrowed size survive. Then Bob (B) submits a 2-GPU job: Alice's job
shrinks to 2 (a resize, no preemption) and Bob's job runs; Alice's next job waits with
the reason ``quota``; ``lyra status --json``'s ``teams`` says who borrowed and lent. An
admin cancels Alice's job at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ray.conftest import LiveCluster
from tests.ray.live_helpers import job, kill_scheduler, scheduler_client, wait_until

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

V100 = {"v100": 1.0}


def _address() -> str:
    import ray

    return str(ray.get_runtime_context().gcs_address)


def _cli(token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LYRA_TOKEN": token}
    env.pop("LYRA_TOKEN_FILE", None)
    return subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", *args, "--address", _address()],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_borrow_shrink_visibility_and_a_kill(live_cluster: LiveCluster, tmp_path: Path) -> None:
    from lyra_ray.sdk import Client, LyraError, SpecError

    boot = scheduler_client(live_cluster, "lyra", token="", round_s=3600.0)
    root_token = boot.add_user("root", admin=True)
    root = Client(_address(), token=root_token)
    root.add_team("a", quota="v100=2", borrow_limit=2)
    root.add_team("b", quota="v100=2")
    alice = Client(_address(), token=root.add_user("alice", team="a"))
    carol = Client(_address(), token=root.add_user("carol", team="a"))
    bob = Client(_address(), token=root.add_user("bob", team="b"))
    dave = Client(_address(), token=root.add_user("dave"))

    # bad input: one line naming the field, nothing changes
    before = root.teams()
    for bad, field in (
        (lambda: root.add_team("c", quota="v100=-1"), "quota"),
        (lambda: root.add_team("c", quota="a100=1"), "quota"),
        (lambda: root.add_team("c", quota_effective=float("inf")), "quota_effective"),
        (lambda: root.move_user("alice", "nope"), "team"),
        (lambda: alice.submit(job("x", 10, tmp_path / "x.log", throughput=V100), team="b"), "team"),
    ):
        with pytest.raises(SpecError, match=f"field '[^']*{field}"):
            bad()
    assert root.teams() == before

    el = alice.submit(
        job(
            "elastic",
            100_000,
            tmp_path / "e.log",
            min_workers=2,
            max_workers=4,
            throughput=V100,
            config={"step_sleep_s": 0.05, "checkpoint_every": 20},
        )
    )

    def workers(client: Client, jid: str) -> int:
        a = client.status(jid)["assignment"]
        return int(a["workers"]) if a else 0

    def teams(client: Client) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in client.overview()["teams"]}

    wait_until(lambda: workers(alice, el) == 4, 240, "team A's elastic job borrowing to 4")
    wait_until(
        lambda: teams(root)["a"]["borrowed"] == {"v100": 2.0}, 60, "A borrowing 2 V100s in status"
    )
    assert teams(root)["b"]["lent"] == {"v100": 2.0} and teams(root)["b"]["used"] == {}

    # who sees what: a teammate sees, may not cancel; an outsider sees nothing
    assert el in {r["id"] for r in carol.list()}
    assert el in {r["id"] for r in carol.overview()["jobs"]}
    with pytest.raises(LyraError, match="only its owner or an admin may cancel"):
        carol.cancel(el)
    assert el not in {r["id"] for r in dave.list()} | {r["id"] for r in dave.overview()["jobs"]}
    assert el not in {r["id"] for r in bob.list()}

    # the scheduler dies while A borrows; everything comes back
    restarts = int(root.call("ping")["restarts"])
    kill_scheduler()
    wait_until(lambda: int(root.call("ping")["restarts"]) > restarts, 120, "scheduler restart")
    assert root.teams() == before
    assert {t["name"]: t["members"] for t in root.teams()}["a"] == ["alice", "carol"]
    assert root.status(el)["team"] == "a"
    assert workers(alice, el) == 4 and teams(root)["a"]["borrowed"] == {"v100": 2.0}
    assert el in {r["id"] for r in carol.list()} and el not in {r["id"] for r in dave.list()}

    # the lender submits: the borrower's elastic job shrinks, B's job runs
    b_job = bob.submit(job("rigid", 100_000, tmp_path / "b.log", workers=2, throughput=V100))
    wait_until(lambda: bob.status(b_job)["status"] == "running", 240, "B's job running")
    wait_until(lambda: workers(alice, el) == 2, 120, "A's elastic job shrunk to 2")

    def sizes() -> list[int]:
        return [a["workers"] for _t, j, _g, a in root.call("launches") if j == el]

    wait_until(lambda: sizes()[-2:] == [4, 2], 120, "A's job relaunched with 2 workers")
    wait_until(lambda: root.status(b_job)["steps_done"] > 0, 240, "B's job stepping")
    st = root.status(el)
    assert st["status"] == "running" and st["num_preemptions"] == 0 and st["num_resizes"] >= 1
    now = teams(root)
    assert now["a"]["borrowed"] == {} and now["b"]["used"] == {"v100": 2.0}

    # A's guarantee is in use and B's is B's again: A's next job waits for A's quota
    more = alice.submit(job("more", 10, tmp_path / "m.log", workers=2, throughput=V100))
    wait_until(lambda: alice.status(more).get("reason_code") == "quota", 60, "a quota wait")
    assert "team a's quota" in alice.status(more)["reason"]

    # the CLI: status --json's teams, the teams table, team list
    out = _cli(root_token, "status", "--json")
    assert out.returncode == 0, out.stderr
    # stdout holds the JSON alone (Ray's own lines, if any, go to stderr)
    view = json.loads(out.stdout)
    got = {t["name"]: t for t in view["teams"]}
    assert got["a"]["unit"] == "gpus" and got["a"]["guarantee"] == {"v100": 2.0}
    keys = {"name", "unit", "guarantee", "used", "borrowed", "lent", "reference", "notes"}
    assert set(got["a"]) == keys
    settings = view["team_settings"]
    # 4 GPUs of each type: the most common type is the alphabetically first, the K80
    assert settings["reference"] == "auto" and settings["reference_in_force"] == "k80"
    assert settings["enforce"] == "inside" and settings["oversubscribed"] is None
    ref = _cli(root_token, "team", "reference")
    assert ref.returncode == 0 and "GPUs of k80 (the cluster's most common" in ref.stdout
    listed = _cli(root_token, "team", "list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[-1] == "3 team(s)"
    refused = _cli(root_token, "team", "remove", "a")
    assert refused.returncode == 2 and "field 'name'" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    # an admin may cancel anyone's job
    alice.cancel(more)
    root.cancel(el)
    bob.cancel(b_job)
    assert root.wait(el, timeout=120)["status"] == "cancelled"
    assert bob.wait(b_job, timeout=120)["status"] == "cancelled"
