"""``benchmarks/suite_cpu.py``: the kinds of process (from their command lines, and from
the 15 bytes of ``comm`` an accounting record keeps), the CPU each spent between samples,
the accounting records read and joined to the samples, the floor a run's CPU sets on its
time, and real (tiny) commands measured end to end, with accounting and without."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from benchmarks import _proc_acct
from benchmarks._proc_acct import RECORD, Exited, Whole, attribute, comp_t, parse
from benchmarks._proc_kinds import GONE, cpu_deltas, kind, name, ran_as
from benchmarks.suite_cpu import HELD, main, measure, summarise


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
        (  # its arguments name the workers and agents it starts: the program decides
            "/x/ray/core/src/ray/raylet/raylet\0--python_worker_command=/v/bin/python"
            " /x/ray/_private/workers/default_worker.py\0--agent_command=/v/bin/python"
            " -u /x/ray/dashboard/agent.py",
            "Ray core (GCS, raylets)",
        ),
        ("/v/bin/python\0/x/ray/_private/workers/default_worker.py\0--node", "Ray idle workers"),
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
        # an ended process's comm: Ray's title cut to 15 bytes
        ("ray::RayTrainWor", "training workers"),
        ("ray::TrainContro", "training workers"),
        ("ray::_import_en", "training control"),
        ("ray::GlobalSche", "lyra scheduler"),
        ("ray::ServeRepli", "serving replicas"),
        ("ray::ServeContr", "Serve controller and proxy"),
        ("ray::DashboardA", "Ray dashboard, agents, monitors"),
        ("ray::RuntimeEnv", "Ray dashboard, agents, monitors"),
        ("ray::JobSupervi", "job drivers and CLI"),
        ("ray", "job drivers and CLI"),
        ("python\0/x/bin/ray\0start\0--head", "job drivers and CLI"),
        ("ray::PlacementG", "other Ray actors and tasks"),
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
        ("/v/bin/python\0-u\0-m\0pytest\0-q", "python -m pytest"),
        ("/v/bin/python3\0-c\0while True: pass", "python3 -c"),
        ("/v/bin/python\0/v/bin/ray\0start\0--head", "ray start"),
        ("/v/bin/python\0-B\0/v/ray/dashboard/dashboard.py\0--host", "dashboard.py"),
        ("/v/bin/python", "python"),
        ("/v/bin/python\0-m", "python -m"),
        (
            'ray-dashboard-JobHead-0 (/v/bin/python -B -c "from multiprocessing.forkserver'
            " import main; main(25, 27, ['ray'], **{'sys_path': ['/v/lib/site-packages',"
            " '__editable__.x.__path_hook__']})\")",
            "ray-dashboard-JobHead-0",
        ),
    ],
)
def test_each_process_has_its_name(cmdline: str, want: str) -> None:
    assert name(cmdline) == want


def test_a_process_is_named_by_its_busiest_title_not_its_idle_or_zombie_one() -> None:
    worker = ("training workers", "ray::GangWorker.run")
    idle = ("Ray idle workers", "ray::IDLE")
    assert ran_as(None, idle) == idle  # first seen idle: idle until it runs something
    assert ran_as(idle, worker) == worker
    assert ran_as(worker, idle) == worker  # back in the pool: still what it ran
    assert ran_as(worker, GONE) == worker  # a zombie's empty command line
    assert ran_as(None, GONE) == GONE
    other = ("lyra scheduler", "ray::GlobalScheduler")
    assert ran_as(worker, other) == other  # a worker reused for another actor


def test_cpu_between_samples_counts_new_processes_whole_and_old_ones_by_their_delta() -> None:
    prev = {(1, 10): 5.0, (2, 20): 1.0}
    now = {(1, 10): 7.5, (2, 20): 1.0, (3, 30): 0.4, (2, 99): 0.2}  # pid 2 reused: new
    assert cpu_deltas(prev, now) == {(1, 10): 2.5, (3, 30): 0.4, (2, 99): 0.2}


def test_the_floor_is_the_busy_cpu_over_the_cores() -> None:
    counted = Whole(
        {"a": 600.0, "b": 200.0}, {"x": 1.0, "y": 3.0}, {"a": 7, "b": 1}, {"x": 1, "y": 2}
    )
    out = summarise(600.0, 960.0, 2, counted)
    assert out["floor_min"] == 8.0  # 960 CPU-s on 2 cores: 8 minutes at least
    assert out["host_busy_share"] == 0.8
    assert out["counted_share"] == pytest.approx(800 / 960, abs=1e-3)
    assert list(out["by_kind"]) == ["a", "b"]
    assert out["by_kind"]["a"] == {"cpu_s": 600.0, "share": 0.75, "processes": 7}
    assert out["top_names"] == {
        "y": {"cpu_s": 3.0, "processes": 2},
        "x": {"cpu_s": 1.0, "processes": 1},
    }


def _record(pid: int, start_s: int, user: int, system: int, comm: bytes, version: int = 3) -> bytes:
    return RECORD.pack(
        0, version, 0, 0, 0, 0, pid, 1, start_s, 0.0, user, system, 0, 0, 0, 0, 0, 0, comm
    )


def test_comp_t_is_a_13_bit_mantissa_and_a_base_8_exponent() -> None:
    assert comp_t(8191) == 8191
    assert comp_t((1 << 13) | 1000) == 8000  # exponent 1: times 8
    assert comp_t((2 << 13) | 5) == 320


def test_accounting_records_are_read_and_bad_files_refused() -> None:
    data = _record(42, 1_000, 150, 50, b"ray::GangWorker") + _record(7, 1_001, 3, 0, b"sh")
    assert parse(data) == [
        Exited(42, 1_000, 2.0, "ray::GangWorker"),  # 200 ticks at 100 a second
        Exited(7, 1_001, 0.03, "sh"),
    ]
    assert parse(b"") == []
    with pytest.raises(ValueError, match="not whole 64-byte records"):
        parse(data[:-1])
    with pytest.raises(ValueError, match="record at byte 64 is version 2"):
        parse(data[:64] + _record(1, 1, 1, 1, b"x", version=2))


def test_each_process_counts_once_whole_under_the_name_its_samples_saw() -> None:
    boot, hz = 1_000.0, 100
    exited = [
        Exited(10, 1_010, 4.0, "ray::IDLE"),  # seen as a gang worker, ended as idle
        Exited(11, 1_020, 3.0, "ray::_import_en"),  # never seen: named by its comm
        Exited(12, 1_000, 9.0, "raylet"),  # older than the run: 5 s of it at the baseline
        Exited(13, 1_030, 1.0, "python"),  # ended; its zombie is still in /proc
    ]
    baseline = {(12, 0): 5.0, (20, 0): 2.0}
    final = {(20, 0): 2.5, (13, 3_000): 1.0, (21, 4_000): 0.7}
    seen = {
        (10, 1_000): ("training workers", "ray::GangWorker.run"),
        (12, 0): ("Ray core (GCS, raylets)", "raylet"),
        (13, 3_000): ("pytest processes", "python"),
        (20, 0): ("lyra scheduler", "ray::GlobalScheduler"),
        (21, 4_000): ("serving replicas", "ray::ServeReplica:a:b"),
    }
    out = attribute(exited, baseline, final, seen, boot, hz)
    assert out.cpu_by_kind == pytest.approx(
        {
            "training workers": 4.0,
            "training control": 3.0,
            "Ray core (GCS, raylets)": 4.0,
            "pytest processes": 1.0,  # once, from its record
            "lyra scheduler": 0.5,  # alive: its final less its baseline
            "serving replicas": 0.7,  # started and alive at the end
        }
    )
    assert out.procs_by_name["ray::_import_en"] == 1
    assert sum(out.procs_by_kind.values()) == 6


BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass"


def test_accounting_counts_a_process_that_lived_between_two_samples(tmp_path: Path) -> None:
    """Samples 60 s apart never see a child that burns 0.5 s and ends; its record does."""
    if os.environ.get(HELD):
        pytest.skip("an outer suite_cpu run holds the host's process accounting")
    probe = _proc_acct.start(tmp_path / "probe.acct")
    if probe is not None:
        pytest.skip(probe)  # not root, or a kernel without BSD process accounting
    _proc_acct.stop()
    child = (
        f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN.format(s=0.5)!r}])"
    )
    rc, how, counted = measure([sys.executable, "-c", child], every_s=60.0)
    assert rc == 0 and how == "process accounting"
    assert counted.cpu_by_kind["other"] >= 0.45  # the grandchild's half second, whole
    assert counted.procs_by_kind["other"] >= 2  # the child and the grandchild


def test_without_accounting_the_samples_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HELD, "1")  # as inside an outer run: accounting left alone
    rc, how, counted = measure([sys.executable, "-c", BURN.format(s=0.5)], every_s=0.1)
    assert rc == 0 and how == "samples every 0.1 s (process accounting is held by an outer run)"
    assert counted.cpu_by_kind["other"] >= 0.3  # its process, seen by the samples


def test_a_command_is_run_measured_and_appended(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    busy = BURN.format(s=0.5)
    rc = main(
        ["--every", "0.2", "--out", str(out), "--note", "t", "--", sys.executable, "-c", busy]
    )
    assert rc == 0
    (run,) = json.loads(out.read_text())["runs"]
    assert run["exit"] == 0 and run["note"] == "t"
    assert 0 < run["calibration_s"] < 60
    assert run["host_busy_cpu_s"] >= 0.45  # the command's own half second, at least
    assert run["by_kind"]["other"]["cpu_s"] >= 0.3  # its process
    how = run["counted_by"]  # samples only where accounting is off, and then it says why
    assert how == "process accounting" or how.startswith("samples every 0.2 s ("), how
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
