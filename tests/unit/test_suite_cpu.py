"""``benchmarks/suite_cpu.py``: the kinds of process, the CPU each spent between samples,
the floor a run's CPU sets on its time, and a real (tiny) command measured end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks._proc_kinds import cpu_deltas, kind, name
from benchmarks.suite_cpu import main, summarise


@pytest.mark.parametrize(
    ("cmdline", "want"),
    [
        ("ray::GangWorker.run\0", "training workers"),
        ("ray::Gang", "training workers"),
        ("ray::GlobalScheduler.submit", "lyra scheduler"),
        ("ray::ServeReplica:lyra-shop:Model.handle_request", "serving replicas"),
        ("ray::ProxyActor", "Serve controller and proxy"),
        ("ray::IDLE", "Ray idle workers"),
        ("/x/ray/core/src/ray/gcs/gcs_server\0--log_dir=/tmp", "Ray core (GCS, raylets)"),
        ("/x/ray/core/src/ray/raylet/raylet\0--node", "Ray core (GCS, raylets)"),
        ("ray::DashboardAgent", "Ray dashboard, agents, monitors"),
        ("python\0/x/ray/dashboard/dashboard.py\0--host", "Ray dashboard, agents, monitors"),
        ("ray-dashboard-NodeHead-0", "Ray dashboard, agents, monitors"),
        ("python\0-u\0/x/ray/_private/log_monitor.py", "Ray dashboard, agents, monitors"),
        ("ray::JobSupervisor", "job drivers and CLI"),
        ("python\0-m\0lyra_ray.cli\0submit\0j.yaml", "job drivers and CLI"),
        ("ray::SomethingElse", "other Ray actors and tasks"),
        ("python\0-m\0pytest\0-q\0tests", "pytest processes"),
        ("python\0-u\0-c\0import sys;exec(eval(sys.stdin.readline()))", "pytest processes"),
        ("/usr/lib/chromium/chromium\0--headless", "tools (Chromium, Prometheus, Redis)"),
        ("python3\0-c\0while True: pass", "other"),
        ("", "other"),
    ],
)
def test_each_process_has_its_kind(cmdline: str, want: str) -> None:
    assert kind(cmdline) == want


@pytest.mark.parametrize(
    ("cmdline", "want"),
    [
        ("ray::GangWorker.run\0", "ray::GangWorker.run"),
        ("ray::ServeReplica:lyra-shop:Model.handle_request\0", "ray::ServeReplica:lyra-shop:Model"),
        ("/x/ray/core/src/ray/raylet/raylet\0--node", "raylet"),
        ("", "?"),
    ],
)
def test_each_process_has_its_name(cmdline: str, want: str) -> None:
    assert name(cmdline) == want


def test_cpu_between_samples_counts_new_processes_whole_and_old_ones_by_their_delta() -> None:
    first = cpu_deltas({}, {(1, 10): 5.0, (2, 20): 1.0}, first=True)
    assert first == {}  # the baseline: CPU spent before the measurement is not its own
    prev = {(1, 10): 5.0, (2, 20): 1.0}
    now = {(1, 10): 7.5, (2, 20): 1.0, (3, 30): 0.4, (2, 99): 0.2}  # pid 2 reused: new
    assert cpu_deltas(prev, now, first=False) == {(1, 10): 2.5, (3, 30): 0.4, (2, 99): 0.2}


def test_the_floor_is_the_busy_cpu_over_the_cores() -> None:
    out = summarise(600.0, 960.0, 2, {"a": 600.0, "b": 200.0}, {"x": 1.0, "y": 3.0})
    assert out["floor_min"] == 8.0  # 960 CPU-s on 2 cores: 8 minutes at least
    assert out["host_busy_share"] == 0.8
    assert out["sampled_share"] == pytest.approx(800 / 960, abs=1e-3)
    assert list(out["by_kind"]) == ["a", "b"]
    assert out["by_kind"]["a"]["share"] == 0.75
    assert list(out["top_names"].items()) == [("y", 3.0), ("x", 1.0)]


def test_a_command_is_run_measured_and_appended(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    rc = main(
        ["--every", "0.2", "--out", str(out), "--note", "t", "--", sys.executable, "-c", busy]
    )
    assert rc == 0
    (run,) = json.loads(out.read_text())["runs"]
    assert run["exit"] == 0 and run["note"] == "t"
    assert 0 < run["calibration_s"] < 60
    assert run["host_busy_cpu_s"] >= 0.45  # the command's own half second, at least
    assert run["by_kind"]["other"]["cpu_s"] >= 0.3  # its process, seen by the samples
    rc = main(["--out", str(out), "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert rc == 3  # the command's status is the script's; the run is kept
    assert len(json.loads(out.read_text())["runs"]) == 2


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        ([], "'command'"),
        (["--every", "nan", "--", "true"], "'--every'"),
        (["--every", "0", "--", "true"], "'--every'"),
    ],
)
def test_bad_arguments_name_the_field(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    assert field in capsys.readouterr().err
