"""Users' own code, identities and ``ray job submit``, on a real local cluster (#16).

* A training function that lives only in a temporary directory outside the project is
  submitted with ``ray job submit --working-dir DIR -- lyra submit job.yaml --wait`` and
  finishes with exactly its steps across a preemption and a resize: every generation's
  workers run in the user's directory. Its entrypoint is ``def train(*args, **kwargs)``
  (a decorator without ``functools.wraps`` around the example loop), which Ray Train
  calls with its config (#42, item 2): lyra calls it the same way.
* A loop written against Ray Train's own API (its context's world size and rank, a gloo
  all-reduce, its own checkpoint through ``report`` and ``get_checkpoint``) runs through
  a shrink and a grow on the default executor (warm workers) and on ``ray_train`` (a
  real Ray Train worker group per generation: the live end-to-end check of that path),
  and sees the same on both.
* User modules that raise, exit or hang at import are refused at submit with a clear
  error; the import runs in a short-lived task, never in the scheduler, which stays up
  with its state unchanged.
* ``ray job stop`` on the submitting driver cancels the lyra job, and the lyra job names
  the Ray job that submitted it.
* With identities on, bob can neither see nor cancel alice's job, an admin can, and a
  call without a token (or with a wrong one) is refused and changes nothing. Last in
  the module: it turns identities on for good.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lyra_ray.sdk import TERMINAL
from tests.ray.conftest import LiveCluster, start_cluster, stop_cluster
from tests.ray.live_helpers import (
    assert_every_step_once,
    job,
    release,
    scheduler_client,
    step_counts,
    wait_until,
)
from tests.ray.user_code_files import (
    BAD_MODULES,
    RAY_API_TRAIN,
    USER_JOBS_TRAIN,
    USER_TRAIN,
    WRAPPED_TRAIN,
    api_runs,
    logged_steps,
    step_counts_by_gen,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

RAY = str(Path(sys.executable).with_name("ray"))
ROOT = Path(__file__).resolve().parents[2]
CKPT = 20


@pytest.fixture(scope="module")
def live() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    cluster = start_cluster((("v100", 2),))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="module")
def client(live: LiveCluster) -> Any:
    policy = "tests.ray.elastic_policy:GreedyElastic"
    return scheduler_client(live, policy, token="", round_s=3600.0, entrypoint_check_s=15.0)


def _driver(live: LiveCluster, workdir: Path, spec: Path, *extra: str) -> list[str]:
    """``ray job submit --working-dir DIR -- lyra submit SPEC --wait``, run from /tmp."""
    return [
        RAY,
        "job",
        "submit",
        "--address",
        live.dashboard_url,
        "--working-dir",
        str(workdir),
        *extra,
        "--",
        sys.executable,
        "-m",
        "lyra_ray.cli",
        "submit",
        spec.name,
        "--wait",
    ]


def _user_dir(
    tmp_path: Path,
    name: str,
    steps: int,
    log: Path,
    entrypoint: str = "my_train:train_loop",
    pace: Path | None = None,
    **kw: Any,
) -> Path:
    d = tmp_path / "user-project"
    d.mkdir(exist_ok=True)
    (d / "my_train.py").write_text(USER_TRAIN)
    (d / "wrapped_train.py").write_text(WRAPPED_TRAIN)
    entry = {
        "name": name,
        "total_steps": steps,
        "entrypoint": entrypoint,
        "throughput": {"v100": 1.0},
        "config": {"step_sleep_s": 0.1, "checkpoint_every": CKPT, "step_log": str(log)},
        **kw,
    }
    if pace is not None:  # the example loop's (wrapped_train): see live_helpers.release
        entry["config"]["pace_file"] = str(pace)
    (d / f"{name}.yaml").write_text(yaml.safe_dump({"jobs": [entry]}))
    return d


def _one(client: Any, name: str) -> dict[str, Any] | None:
    rows = [r for r in client.list() if r["name"] == name]
    return rows[0] if rows else None


def _cancel_active(client: Any, names: set[str]) -> None:
    """Cancel this test's jobs that have not ended (a failed step must not cascade)."""
    for r in client.list():
        if r["name"] in names and r["status"] not in TERMINAL:
            with contextlib.suppress(Exception):  # it may end meanwhile
                client.cancel(r["id"])


def test_user_code_from_a_working_dir_survives_a_preemption_and_a_resize(
    client: Any, live: LiveCluster, tmp_path: Path
) -> None:
    """Once it has been preempted, resumed and shrunk, the job runs its remaining steps
    without pause (``release``): every step once and the exact total still checked."""
    log, pace = tmp_path / "user.log", tmp_path / "pace"
    total = 500
    d = _user_dir(
        tmp_path,
        "user-elastic",
        total,
        log,
        "wrapped_train:train",
        pace,
        min_workers=1,
        max_workers=2,
    )
    assert not (Path.cwd() / "wrapped_train.py").exists()  # the module is only in d
    driver = subprocess.Popen(
        _driver(live, d, d / "user-elastic.yaml"),
        cwd="/tmp",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: len(step_counts(log)) >= 30 if log.exists() else False, 300, "steps")
        jid = str(_one(client, "user-elastic")["id"])  # type: ignore[index]
        # a rigid job on both GPUs preempts it (the policy serves rigid jobs first) ...
        big = client.submit(job("big", 20, tmp_path / "big.log", workers=2))
        assert client.wait(big, timeout=300)["status"] == "finished"
        # ... it resumes from its checkpoint; a one-GPU job then shrinks it to one worker
        wait_until(lambda: client.status(jid)["generation"] >= 2, 120, "resumed")
        gen = client.status(jid)["generation"]
        wait_until(
            lambda: sum(1 for g in step_counts_by_gen(log) if g == gen) >= 10, 180, "stepping"
        )
        small = client.submit(job("small", 20, tmp_path / "small.log", workers=1))
        assert client.wait(small, timeout=300)["status"] == "finished"
        release(pace)
        out, _ = driver.communicate(timeout=400)
    finally:
        if driver.poll() is None:
            driver.kill()
            # WHY: killing the `ray job submit` client leaves its Ray job, and the lyra job
            # it submitted, running; one left on a GPU after an early failure (under a CPU
            # hog) failed the next test, whose job found one GPU instead of two.
            _cancel_active(client, {"user-elastic", "big", "small"})
    assert driver.returncode == 0, out
    st = client.status(jid)
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert st["num_preemptions"] >= 1 and st["num_resizes"] >= 1, st
    sizes = [a["workers"] for _t, j, _g, a in client.call("launches") if j == jid]
    assert 1 in sizes and 2 in sizes, sizes
    assert_every_step_once(log, total, slack=CKPT)
    # the link both ways: the lyra job names the Ray job, whose log names the lyra job
    assert st["ray_job"] and st["ray_job"] in out and jid in out, (st, out)


@pytest.fixture(params=["warm", "ray_train"])
def executor_client(request: Any, client: Any, live: LiveCluster) -> Iterator[Any]:
    """The module's scheduler (the default executor, ``warm``), or one on the
    ``ray_train`` executor (a Ray Train worker group per generation) in its place, with
    its own state and checkpoints; afterwards the module's configuration comes back on
    a fresh state (the module's last tests check that it never restarted)."""
    from tests.ray.live_helpers import replace_scheduler

    if request.param == "warm":
        yield client
        return
    policy = "tests.ray.elastic_policy:GreedyElastic"
    wd = live.workdir
    try:
        yield replace_scheduler(
            live,
            policy,
            token="",
            round_s=3600.0,
            entrypoint_check_s=15.0,
            executor="ray_train",
            state_dir=str(wd / "state-ray-train"),
            storage_path=str(wd / "ckpt-ray-train"),
        )
    finally:  # a fresh state: the tests after this one check the scheduler never restarted
        replace_scheduler(
            live,
            policy,
            token="",
            round_s=3600.0,
            entrypoint_check_s=15.0,
            state_dir=str(wd / "state-after-ray-train"),
        )


def test_ray_train_api_in_user_code_across_a_shrink_and_a_grow(
    executor_client: Any, tmp_path: Path
) -> None:
    """A loop written against Ray Train's API (``get_context().get_world_size()`` /
    ``get_world_rank()``, ``report(metrics, checkpoint=...)``, ``get_checkpoint()``, a
    gloo all-reduce) behaves the same on both executors through a shrink 2 -> 1 and a
    grow back: every generation's ranks and process group are its own size, and each
    resumed generation is handed the user's own checkpoint, reported last, at exactly
    the step lyra resumed from (Ray Train's rule: a rerun gets the checkpoint reported
    last, whatever it holds). The ``ray_train`` run is the live end-to-end check of the
    real Ray Train path with a resize, kept beside the default executor. Once it steps
    at 2 again, the loop runs its remaining steps without pause (``release``): every
    check above is on what it saw up to then, and on the exact total after."""
    client = executor_client
    d = tmp_path / "ray-api"
    d.mkdir()
    (d / "ray_api_train.py").write_text(RAY_API_TRAIN)
    log, api, pace = tmp_path / "api-steps.log", tmp_path / "api.jsonl", tmp_path / "pace"
    total = 300
    raw = job(
        "ray-api", total, log, pace, min_workers=1, max_workers=2, throughput={"v100": 1.0},
        entrypoint="ray_api_train:train_loop",
        config={"step_sleep_s": 0.1, "checkpoint_every": CKPT, "api_log": str(api)},
    )  # fmt: skip
    jid = client.submit(raw, runtime_env={"working_dir": str(d)}, inherit_env=False)
    try:
        wait_until(lambda: log.exists() and len(step_counts(log)) >= 20, 300, "stepping on 2")
        assert client.status(jid)["assignment"]["workers"] == 2
        # a rigid one-GPU job shrinks it to one worker; once it stepped at that size the
        # rigid job goes and it grows back
        hold = client.submit(job("api-hold", 100_000, tmp_path / "hold.log", workers=1))

        def stepped_alone() -> bool:
            ones = {r["generation"] for r in api_runs(api) if r["world"] == 1}
            return sum(1 for g, _ in logged_steps(log) if g in ones) >= 10

        wait_until(stepped_alone, 300, "10 steps on one worker")
        client.cancel(hold)

        def stepped_grown_back() -> bool:
            runs = api_runs(api)
            return len(runs) >= 3 and any(g == runs[2]["generation"] for g, _ in logged_steps(log))

        wait_until(stepped_grown_back, 300, "stepping on 2 again")
        release(pace)  # every size seen: the rest of its steps without pause
        st = client.wait(jid, timeout=400)
    finally:  # a failed step must not leave its jobs on the GPUs of the next test
        _cancel_active(client, {"ray-api", "api-hold"})
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert st["num_resizes"] >= 2, st
    assert_every_step_once(log, total, slack=CKPT)
    runs = api_runs(api)
    sizes = [(g, a["workers"]) for _t, j, g, a in client.call("launches") if j == jid]
    # no extra generation: a run whose loop reported last without StepLoop's step still
    # ends "completed" (its step read from the checkpoints)
    assert [w for _g, w in sizes] == [2, 1, 2], sizes
    assert [r["world"] for r in runs] == [2, 1, 2], runs  # as the loop itself saw them
    assert runs[0]["handed"]["step"] == 0 and runs[0]["lyra_step"] == 0
    world_of = {r["generation"]: r["world"] for r in runs}
    logged = logged_steps(log)
    for r in runs[1:]:  # every resumed generation got the user's own checkpoint back ...
        assert r["lyra_step"] > 0 and r["handed"]["step"] == r["lyra_step"], runs
        # ... holding the all-reduced rank sums of every step before it, at each size
        want = sum(world_of[g] * (world_of[g] + 1) / 2 for g, _ in logged if g < r["generation"])
        assert r["handed"]["rank_sum"] == want, (r, want)


@pytest.mark.parametrize("kind", sorted(BAD_MODULES))
def test_a_user_module_that_fails_at_import_or_cannot_be_called_is_refused(
    client: Any, tmp_path: Path, kind: str
) -> None:
    from lyra_ray.sdk import SpecError

    code, needle = BAD_MODULES[kind]
    d = tmp_path / "bad"
    d.mkdir()
    if "def train_loop" not in code:
        code += "def train_loop(config):\n    pass\n"
    (d / f"bad_{kind}.py").write_text(code)
    before = client.list()
    ping = client.call("ping")
    raw = job(f"bad-{kind}", 10, tmp_path / "log")
    raw["entrypoint"] = f"bad_{kind}:train_loop"
    with pytest.raises(SpecError, match="entrypoint") as err:
        client.submit(raw, runtime_env={"working_dir": str(d)}, inherit_env=False)
    assert needle in str(err.value), err.value
    assert client.list() == before
    after = client.call("ping")
    assert after["restarts"] == ping["restarts"] == 0
    if kind != "hangs":
        return
    # still schedules after the worst case: a good job from the same directory runs
    (d / "good.py").write_text(textwrap.dedent(USER_TRAIN))
    ok = job(f"good-after-{kind}", 5, tmp_path / "ok.log", workers=1)
    ok["entrypoint"] = "good:train_loop"
    jid = client.submit(ok, runtime_env={"working_dir": str(d)}, inherit_env=False)
    assert client.wait(jid, timeout=300)["status"] == "finished"


def test_stopping_the_ray_job_cancels_the_lyra_job(
    client: Any, live: LiveCluster, tmp_path: Path
) -> None:
    log = tmp_path / "stopped.log"
    d = _user_dir(tmp_path, "to-stop", 100_000, log, workers=1)
    sid = "lyra-stop-test-" + os.urandom(4).hex()
    out = subprocess.run(
        _driver(live, d, d / "to-stop.yaml", "--submission-id", sid, "--no-wait"),
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    wait_until(lambda: log.exists() and len(step_counts(log)) >= 5, 300, "the job stepping")
    row = _one(client, "to-stop")
    assert row is not None and row["ray_job"] == sid, row
    stop = subprocess.run(
        [RAY, "job", "stop", "--address", live.dashboard_url, sid],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    st = client.wait(str(row["id"]), timeout=120)
    assert st["status"] == "cancelled", st
    logs = subprocess.run(
        [RAY, "job", "logs", "--address", live.dashboard_url, sid],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert f"lyra job {row['id']} submitted by Ray job {sid}" in logs, logs


def test_a_working_dir_with_its_own_jobs_and_policies_packages(client: Any, tmp_path: Path) -> None:
    """A user's ``jobs/`` and ``policies/`` are theirs: lyra's install as lyra_ray.jobs and
    lyra_ray.policies (#30, item 3), so neither shadows the other. The job's entrypoint
    ``jobs.train:train_loop`` and its ``policies.mine`` are the user's own; the scheduler
    that places it goes on using lyra_ray.policies."""
    d = tmp_path / "own-packages"
    for pkg in ("jobs", "policies"):
        (d / pkg).mkdir(parents=True)
        (d / pkg / "__init__.py").write_text("")
    (d / "jobs" / "train.py").write_text(USER_JOBS_TRAIN)
    (d / "policies" / "mine.py").write_text('MARK = "users-own-policy-7"\n')
    log = tmp_path / "own.log"
    raw = job("own-packages", 4, log, workers=1, entrypoint="jobs.train:train_loop")
    jid = client.submit(raw, runtime_env={"working_dir": str(d)}, inherit_env=False)
    assert client.wait(jid, timeout=120)["status"] == "finished"
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    assert sorted(int(r[1]) for r in rows) == [0, 1, 2, 3]
    for _gen, _step, mark, theirs, ours in rows:
        assert mark == "users-own-policy-7"  # the user's module, from their working dir
        assert Path(theirs).parent.name == "policies" and "own-packages" not in ours
        assert Path(ours).resolve() == (ROOT / "policies" / "base.py").resolve()
    assert client.call("ping")["restarts"] == 0  # the scheduler's own policies still load


def test_identities_own_jobs_and_refuse_strangers(client: Any, tmp_path: Path) -> None:
    from lyra_ray.sdk import AuthError, Client, LyraError

    admin_token = client.add_user("root", admin=True)  # the first user turns them on
    admin = Client(client_address(client), token=admin_token)
    alice = Client(client_address(client), token=admin.add_user("alice"))
    bob = Client(client_address(client), token=admin.add_user("bob"))
    assert alice.whoami()["name"] == "alice" and not alice.whoami()["admin"]
    jid = alice.submit(job("alices", 100_000, tmp_path / "a.log", workers=1))
    bobs = bob.submit(job("bobs", 5, tmp_path / "b.log", workers=1))
    assert [r["id"] for r in bob.list()] == [bobs]
    assert {jid, bobs} <= {r["id"] for r in admin.list()}
    # another user's job is answered exactly like an id that does not exist
    for target in (jid, "alices-9999-0000"):
        with pytest.raises(LyraError, match="unknown job") as refused:
            bob.cancel(target)
        assert "alices" not in str(refused.value).replace(target, "")
        with pytest.raises(LyraError, match="unknown job"):
            bob.status(target)
    for stranger in ("", "lyra_0123456789abcdef_" + "x" * 43, "not a token"):
        nobody = Client(client_address(client), token=stranger)
        with pytest.raises(AuthError):
            nobody.list()
        with pytest.raises(AuthError):
            nobody.cancel(jid)
        with pytest.raises(AuthError):
            nobody.submit(job("sneaky", 5, tmp_path / "s.log", workers=1))
    with pytest.raises(AuthError):
        bob.add_user("mallory", admin=True)
    with pytest.raises(AuthError):
        bob.call("shutdown")
    assert alice.status(jid)["status"] in ("queued", "running")
    assert "sneaky" not in {r["name"] for r in admin.list()}
    admin.cancel(jid)
    assert alice.wait(jid, timeout=120)["status"] == "cancelled"
    assert bob.wait(bobs, timeout=300)["status"] == "finished"
    assert [u["name"] for u in admin.users()] == ["alice", "bob", "root"]


def client_address(client: Any) -> str:
    import ray

    return str(ray.get_runtime_context().gcs_address)
