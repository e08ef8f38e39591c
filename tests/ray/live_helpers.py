"""Shared checks for the live tests: step logs, worker placement, waiting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.waiting import wait_for

TRAIN = "lyra_ray.jobs.train_example:train_loop"


def job(name: str, steps: int, log: Path, pace: Path | None = None, **kw: Any) -> dict[str, Any]:
    """A tiny example-model job that logs every step it runs to ``log``; with ``pace``,
    it keeps its ``step_sleep_s`` until :func:`release` is called on that file."""
    cfg: dict[str, Any] = {"step_sleep_s": 0.05, "checkpoint_every": 10, "step_log": str(log)}
    if pace is not None:
        cfg["pace_file"] = str(pace)
    cfg.update(kw.pop("config", {}))
    d: dict[str, Any] = {"name": name, "total_steps": steps, "entrypoint": TRAIN, "config": cfg}
    d.setdefault("throughput", {"v100": 2.0, "p100": 1.0, "k80": 0.5})
    d.update(kw)
    return d


def release(pace: Path) -> None:
    """Let the jobs paced by ``pace`` run their remaining steps without pause.

    WHY: a live test's job must outlast the events it is there for (a preemption, a
    loan, a reclaim) on the slowest host, so its steps are many and slow; once the test
    has seen those events, the rest of the steps prove nothing new about timing, and
    waiting them out at the slow pace cost minutes of the suite (issue 47). What the
    job still proves (every step run once, the exact total) is unchanged."""
    set_pace(pace, 0.0)


def set_pace(pace: Path, pause_s: float) -> None:
    """Make the jobs paced by ``pace`` sleep ``pause_s`` after each step from their next
    step on (written whole, so that no worker reads half a number)."""
    tmp = pace.with_name(pace.name + ".tmp")
    tmp.write_text(repr(float(pause_s)))
    tmp.replace(pace)


def step_counts(log: Path) -> Counter[int]:
    return Counter(int(line.split()[1]) for line in log.read_text().split("\n") if line.strip())


def assert_every_step_once(log: Path, total: int, slack: int = 0) -> None:
    """No step lost; at most ``slack`` steps repeated (one checkpoint interval)."""
    counts = step_counts(log)
    assert sorted(counts) == list(range(total)), f"steps lost: {set(range(total)) - set(counts)}"
    repeated = sum(c - 1 for c in counts.values())
    assert repeated <= slack, f"{repeated} steps repeated: {counts.most_common(5)}"


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    wait_for(pred, timeout, what)


def assert_placements_match(client: Any, job_id: str) -> int:
    """Every worker of every run sat on a node (and GPU type) its assignment named; a
    mixed-type run's workers on the types of its parts."""
    launches = {gen: a for _t, jid, gen, a in client.call("launches") if jid == job_id}
    seen = [p for p in client.call("history") if p["job_id"] == job_id]
    assert seen, f"no worker of {job_id} reported its node"
    for p in seen:
        a = launches[p["generation"]]
        types = {a["gpu_type"], *(t for t, _ in a.get("extra", ()))}  # mixed-type jobs
        assert p["labels"]["gpu-type"] in types, (p, a)
        assert p["node_id"] in {n for n, _ in a["nodes"]}, (p, a)
    return len(seen)


def scheduler_client(live: Any, policy: str, token: str | None = None, **cfg: Any) -> Any:
    """Start a scheduler on ``live`` with the live tests' defaults (state and checkpoints
    under the cluster's workdir, a 0.5 s cycle, 20 s grace) and return a client."""
    from lyra_ray.runtime.scheduler_start import start_scheduler
    from lyra_ray.sdk import Client

    defaults = {
        "state_dir": str(live.workdir / "state"),
        "storage_path": str(live.workdir / "ckpt"),
        "period_s": 0.5,
        "grace_s": 20.0,
    }
    start_scheduler({"policy": policy, **defaults, **cfg})
    return Client(live.address, token=token)


def replace_scheduler(live: Any, policy: str, **cfg: Any) -> Any:
    """Kill the scheduler actor for good, wait until its name is free, start another
    (a test that needs a scheduler with another configuration on the same cluster)."""
    import ray

    from lyra_ray.sdk import SCHEDULER_ACTOR

    try:
        ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace="lyra"), no_restart=True)
    except ValueError:
        pass
    else:
        wait_until(lambda: actor_gone(SCHEDULER_ACTOR), 60, "old scheduler gone")
    return scheduler_client(live, policy, **cfg)


def kill_scheduler() -> None:
    """SIGKILL the scheduler actor; Ray restarts it (a crash, not a replacement)."""
    import ray

    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR

    ray.kill(ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE), no_restart=False)


def actor_gone(name: str) -> bool:
    import ray

    try:
        ray.get_actor(name, namespace="lyra")
    except ValueError:
        return True
    return False


def start_lending_scheduler(workdir: Path, **cfg: Any) -> None:
    """The scheduler under Lyra, lending every server serving does not need (no reserve),
    as soon as it does not need it (``lend_after_s: None``, Lyra's default too; stated
    so that the tests keep lending at once whatever the default), and letting jobs of any
    length onto a lent server: the serving tests and benchmarks want a loan at low load.
    It polls every 0.5 s; Serve's proxy gets a free port; ``cfg`` adds to (or overrides)
    the lyra config."""
    from lyra_ray.ops.ports import free_port
    from lyra_ray.runtime.scheduler_start import start_scheduler

    start_scheduler(
        {
            "policy": "lyra",
            "policy_args": {
                "reserve_fraction": 0.0,
                "loan_max_remaining_s": None,
                "lend_after_s": None,
            },
            "state_dir": str(workdir / "state"),
            "storage_path": str(workdir / "ckpt"),
            "period_s": 0.5,
            "grace_s": 30.0,
            "serve_port": free_port(),
            **cfg,
        }
    )
