"""`lyra simulate` end to end: determinism, the JSON contract, and bad input."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lyra_ray.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "lyra_ray" / "data" / "demo_jobs.yaml"
SHARED = ROOT.parent / "shared" / "data"
CONTRACT = {
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "avg_queue_s",
    "median_queue_s",
    "p95_queue_s",
    "makespan_s",
    "gpu_usage_training",
    "gpu_usage_overall",
    "preemption_ratio",
    "completed_jobs",
    "wall_s",
    "jobs",
}


def _run(tmp: Path, name: str, *extra: str) -> dict[str, object]:
    out = tmp / f"{name}.json"
    rc = main(
        [
            "simulate",
            "--trace",
            str(DEMO),
            "--cluster",
            "v100=8,p100=8,k80=16",
            "--gpus-per-node",
            "4",
            "--quiet",
            "--json",
            str(out),
            *extra,
        ]
    )
    assert rc == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_same_trace_same_seed_byte_identical(tmp_path: Path) -> None:
    a, b = _run(tmp_path, "a", "--seed", "3"), _run(tmp_path, "b", "--seed", "3")
    assert set(a) >= CONTRACT
    a.pop("wall_s"), b.pop("wall_s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["completed_jobs"] == 40


def test_plots_written(tmp_path: Path) -> None:
    _run(tmp_path, "p", "--plots", str(tmp_path / "plots"))
    for name in ("jct_cdf.png", "gpu_usage.png", "queue_length.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 1000


def _bad(tmp: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    rc = main(["simulate", "--quiet", *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    return err


def test_malformed_gavel_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tput = SHARED / "gavel" / "simulation_throughputs.json"
    if not tput.exists():
        pytest.skip("shared data absent")
    t = tmp_path / "bad.trace"
    good = "ResNet-18 (batch size 128)\tcmd\tdir\t--n\t1\t1000\t1\t1\t-1\t0"
    t.write_text(good + "\n" + good.replace("\t1000\t", "\tlots\t") + "\n")
    err = _bad(tmp_path, capsys, ["--trace", str(t), "--throughputs", str(tput)])
    assert f"{t}:2: field 'total_steps'" in err
    t.write_text(good.replace("ResNet-18 (batch size 128)", "NoSuchNet") + "\n")
    err = _bad(tmp_path, capsys, ["--trace", str(t), "--throughputs", str(tput)])
    assert f"{t}:1: field 'job_type': unknown job type 'NoSuchNet'" in err
    t.write_text("only\tthree\tfields\n")
    assert "expected 10 tab-separated fields" in _bad(
        tmp_path, capsys, ["--trace", str(t), "--throughputs", str(tput)]
    )


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("jobs:\n - {name: a, total_steps: -5, throughput: {v100: 1}}\n", "field 'total_steps'"),
        (
            "jobs:\n - {name: a, total_steps: 5, min_workers: 4, max_workers: 2, "
            "throughput: {v100: 1}}\n",
            "min_workers (4) > max_workers (2)",
        ),
        ("jobs:\n - {name: a, total_steps: 5, throughput: {h900: 1}}\n", "no GPU type the job"),
        (
            "jobs:\n - {name: a, total_steps: 5, workers: 99, throughput: {v100: 1}}\n",
            "field 'min_workers': needs 99 GPUs",
        ),
        ("jobs: [\n", "malformed YAML"),
    ],
)
def test_bad_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, needle: str
) -> None:
    f = tmp_path / "jobs.yaml"
    f.write_text(body)
    err = _bad(tmp_path, capsys, ["--trace", str(f), "--cluster", "v100=4"])
    assert needle in err and str(f) in err


def test_bad_cluster_and_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "cluster spec" in _bad(tmp_path, capsys, ["--trace", str(DEMO), "--cluster", "v100"])
    assert "--policy: unknown policy" in _bad(
        tmp_path, capsys, ["--trace", str(DEMO), "--policy", "nope"]
    )
    assert "--jct-window" in _bad(tmp_path, capsys, ["--trace", str(DEMO), "--jct-window", "5:1"])


def test_cli_exit_code_two_without_traceback(tmp_path: Path) -> None:
    f = tmp_path / "j.yaml"
    f.write_text(
        "jobs:\n - {name: a, total_steps: 5, min_workers: 3, max_workers: 1, "
        "throughput: {v100: 1}}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "lyra_ray.cli", "simulate", "--trace", str(f)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "jobs[0]" in out.stderr


@pytest.mark.data
def test_philly_reader_maps_durations() -> None:
    from lyra_ray.sim.traces import read_philly_csv

    path = SHARED / "pollux" / "philly.csv"
    if not path.exists():
        pytest.skip("shared data absent")
    specs = read_philly_csv(path, seed=0, max_jobs=50)
    assert len(specs) == 50 and specs[0].arrival_s == 0
    assert all(b.arrival_s >= a.arrival_s for a, b in itertools.pairwise(specs))
