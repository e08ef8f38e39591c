"""``lyra profile`` on a live fake-GPU cluster (#28): two small jobs of the user's own
measured on two GPU types, alone and paired, through the scheduler; the file it writes
loads, ``lyra simulate --throughputs`` reads it, and a scheduler seeded with it
(``lyra up --throughputs``'s config) accepts a job that names its entry by ``profile:``.

Measuring windows are short here (0.4 s): fake GPUs on a 2-core host, where the numbers
mean little; what is tested is that every measurement runs, through the scheduler, and
lands in a file the rest of lyra reads, each under its own job.

That last check compares the two jobs' rates, so their paces differ by more than a
starved host can turn around: ``slow`` sleeps 0.1 s a step (at most 10 steps/s) against
``small``'s 0.01 s. With ``slow`` at 0.03 s, a whole run under a one-core CPU hog
(2026-12-02) measured ``small`` at 22.3 steps/s and ``slow`` at 27.2: ``small``'s windows
fell among the host's stalls, and a step's CPU, not its sleep, set both rates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lyra_ray.model.throughput import load_gavel_throughputs
from tests.ray.conftest import LiveCluster, start_cluster, stop_cluster
from tests.ray.live_helpers import replace_scheduler, scheduler_client

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    cluster: LiveCluster = start_cluster((("v100", 1), ("k80", 1)))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def _jobs_file(tmp: Path) -> Path:
    jobs = [
        {
            "name": "small",
            "total_steps": 100,
            "entrypoint": "lyra_ray.jobs.train_example:train_loop",
            "throughput": {"v100": 1.0},
            "config": {"step_sleep_s": 0.01},
        },
        {
            "name": "slow",
            "total_steps": 100,
            "entrypoint": "lyra_ray.jobs.train_example:train_loop",
            "throughput": {"v100": 1.0},
            "config": {"step_sleep_s": 0.1, "hidden": 64},
        },
    ]
    f = tmp / "jobs.yaml"
    f.write_text(yaml.safe_dump({"jobs": jobs}))
    return f


def _lyra(*args: str, address: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_ADDRESS": address}
    return subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=400,
    )


def test_profile_measures_user_jobs_alone_and_paired_on_every_gpu_type(
    live: LiveCluster, tmp_path: Path
) -> None:
    client: Any = scheduler_client(live, "fifo")
    out = tmp_path / "profile.json"
    run = _lyra(
        "profile",
        "run",
        str(_jobs_file(tmp_path)),
        "--json",
        str(out),
        "--warmup-s",
        "0.4",
        "--window-s",
        "0.4",
        "--max-windows",
        "6",
        "--max-minutes",
        "6",
        address=live.address,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # (the test cluster's raylets warn about worker start-up; `lyra up` nodes do not)
    lines = [ln for ln in run.stdout.strip().splitlines() if "(raylet)" not in ln]
    assert lines[-1].startswith(f"wrote {out}: 10 of 10 measurements"), run.stdout
    assert any("[10/10]" in line for line in lines), run.stdout  # progress, one per result
    model = load_gavel_throughputs(out)
    assert model.gpu_types() == {"v100", "k80"}
    for g in ("v100", "k80"):
        assert model.alone[("small", 1)][g] > model.alone[("slow", 1)][g] > 0
        for a, b in [("small", "small"), ("small", "slow"), ("slow", "slow")]:
            pa, pb = model.pairs[(a, 1)][g][(b, 1)]
            assert pa > 0 and pb > 0
            if a != b:  # entered under both jobs, each side first in its own row
                assert model.pairs[(b, 1)][g][(a, 1)] == (pb, pa)
    raw = json.loads(out.read_text())
    assert raw["provenance"]["missing"] == [] and raw["provenance"]["source"] == "lyra profile"
    assert raw["spread"]["v100"]["('small', 1)"]["null"] >= 0
    # the profiling jobs went through the scheduler and finished there
    names = [j["name"] for j in client.list() if j["name"].startswith("profile-")]
    assert len(names) == 2 and all(
        j["status"] == "finished" for j in client.list() if j["name"] in names
    )

    # lyra simulate reads it, for jobs that name their entry with profile:
    trace = tmp_path / "trace.yaml"
    trace.write_text(
        yaml.safe_dump(
            {
                "jobs": [
                    {"name": "p", "total_steps": 50, "profile": "small"},
                    {"name": "q", "total_steps": 50, "profile": "slow", "arrival_s": 1.0},
                ]
            }
        )
    )
    sim = _lyra(
        "simulate",
        "--trace",
        str(trace),
        "--throughputs",
        str(out),
        "--cluster",
        "v100=1,k80=1",
        "--policy",
        "max_min_fairness_packed",
        "--json",
        str(tmp_path / "sim.json"),
        address=live.address,
    )
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert json.loads((tmp_path / "sim.json").read_text())["completed_jobs"] == 2

    # a scheduler seeded with it (what lyra up --throughputs FILE configures)
    seeded: Any = replace_scheduler(
        live, "fifo", throughputs=str(out), state_dir=str(tmp_path / "state2")
    )
    job = {
        "name": "mine",
        "total_steps": 30,
        "profile": "small",
        "entrypoint": "lyra_ray.jobs.train_example:train_loop",
        "config": {"step_sleep_s": 0.01},
    }
    jid = seeded.submit(job)
    done = seeded.wait(jid, timeout=240)
    assert done["status"] == "finished", done
    with pytest.raises(Exception, match="field 'profile'"):
        seeded.submit({**job, "name": "other", "profile": "never-profiled"})
