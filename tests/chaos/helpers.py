"""Shared pieces of the reliability campaign (issue #17): its size, its record, the
checks that say "nothing lost, nothing run twice" from the step logs and audit trails,
and the probes that find a run's processes and records on the live cluster to strike.

``LYRA_CHAOS=full`` selects the full campaign's sizes (``python benchmarks/chaos.py``
sets it); without it the short version runs, as ``make test`` does. With
``LYRA_CHAOS_OUT`` set, each scenario writes its figures there as JSON, which the
campaign script gathers into ``benchmarks/results/chaos.json`` and the table of
``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.waiting import wait_for

FULL = os.environ.get("LYRA_CHAOS", "short") == "full"


def size(short: int, full: int) -> int:
    return full if FULL else short


def record(name: str, data: dict[str, Any]) -> None:
    """Write one scenario's figures (only when the campaign asks for them)."""
    where = os.environ.get("LYRA_CHAOS_OUT")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        out = {"scenario": name, "mode": "full" if FULL else "short", **data}
        (Path(where) / f"{name}.json").write_text(json.dumps(out, indent=2, default=str))


def step_lines(log: Path) -> list[tuple[int, int]]:
    """(generation, step) of every step rank 0 ran, in order."""
    out: list[tuple[int, int]] = []
    if not log.exists():  # no step yet
        return out
    for line in log.read_text().splitlines():
        if line.strip():
            gen, step = line.split()
            out.append((int(gen), int(step)))
    return out


def check_steps(log: Path, total: int, slack: int) -> dict[str, int]:
    """Every step ran; at most ``slack`` repeated; no generation ran twice.

    A generation that ran twice would restart its step count from a checkpoint in the
    middle of its own lines; so within each generation the steps must rise by one.
    Returns the generations seen and the steps repeated.
    """
    lines = step_lines(log)
    by_gen: dict[int, list[int]] = defaultdict(list)
    for gen, step in lines:
        by_gen[gen].append(step)
    for gen, steps in by_gen.items():
        assert steps == list(range(steps[0], steps[0] + len(steps))), (
            f"{log.name}: generation {gen} did not run once, in order: {steps[:20]}..."
        )
    seen = [s for _, s in lines]
    assert sorted(set(seen)) == list(range(total)), f"{log.name}: steps lost"
    repeated = len(seen) - len(set(seen))
    assert repeated <= slack, f"{log.name}: {repeated} steps repeated (slack {slack})"
    return {"generations": len(by_gen), "repeated": repeated}


def check_launches(launches: list[Any]) -> None:
    """The audit trail: no (job, generation) was launched twice."""
    pairs = [(jid, gen) for _t, jid, gen, _a in launches]
    dup = {p for p in pairs if pairs.count(p) > 1}
    assert not dup, f"generations launched twice: {sorted(dup)}"


def lyra_cli(*args: str, env: dict[str, str], timeout: float = 600) -> str:
    """``lyra ARGS`` as a user runs it, from the repository root: its stdout, after
    checking it succeeded (else the tails of its output)."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, f"lyra {' '.join(args)}: {out.stdout[-2000:]}{out.stderr[-3000:]}"
    return out.stdout


WORKER_CLASSES = ("GangWorker", "RayTrainWorker")
"""The classes of the processes that run a job's loop: a gang's warm workers (the default
executor) and Ray Train's workers (the ``ray_train`` executor)."""


def train_workers(address: str) -> list[Any]:
    """The live worker actors of the cluster at ``address`` that run jobs' loops (State
    API)."""
    from ray.util.state import list_actors

    return [
        a
        for cls in WORKER_CLASSES
        for a in list_actors(
            address=address,
            filters=[("class_name", "=", cls), ("state", "=", "ALIVE")],
            detail=True,
        )
    ]


def kill_workers_of(address: str, client: Any, job_id: str) -> list[int]:
    """SIGKILL the Train worker processes on the job's nodes (only it runs now)."""
    nodes = {n for n, _ in client.status(job_id)["assignment"]["nodes"]}
    victims = wait_for(
        lambda: [w for w in train_workers(address) if w.node_id in nodes],
        120,
        "the job's Train workers",
    )
    for w in victims:
        os.kill(w.pid, 9)
    return [w.pid for w in victims]


def control_record(job_id: str) -> dict[str, Any]:
    import ray

    from lyra_ray.runtime.control import get_or_create_control

    rec: dict[str, Any] = ray.get(get_or_create_control().snapshot.remote()).get(job_id, {})
    return rec


def rank0_pid(job_id: str, generation: int) -> int | None:
    """The pid of the gang worker running rank 0 of ``generation``, once it runs."""
    import ray

    from lyra_ray.contract.names import NAMESPACE, gang_actor_name

    info = ray.get(ray.get_actor(gang_actor_name(job_id), namespace=NAMESPACE).info.remote())
    if info["running"] != generation:
        return None
    return next((m["pid"] for m in info["members"] if m["rank"] == 0 and m["slot"]), None)
