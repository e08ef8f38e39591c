"""A one-job trace whatever its numbers: refused naming the field, or simulated in a
number of core steps bounded by the admission limits (it used to run without end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.cli import main
from lyra_ray.model.admission import MAX_ARRIVAL_S, MAX_RUN_S, MAX_STEPS
from lyra_ray.sim.workload import SimSettings, assemble

ROOT = Path(__file__).resolve().parents[2]
GAVEL_TABLE = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def _gavel(tmp_path: Path, steps: str = "1000", slo: str = "-1", arrival: str = "0") -> Path:
    trace = tmp_path / "one.trace"
    trace.write_text(
        f"ResNet-50 (batch size 64)\tcmd\tdir\t-n\t1\t{steps}\t1\t1\t{slo}\t{arrival}\n"
    )
    return trace


def _yaml(tmp_path: Path, **fields: object) -> Path:
    job = {"name": "big", "workers": 1, "throughput": {"v100": 10}, "total_steps": 100, **fields}
    trace = tmp_path / "one.yaml"
    trace.write_text("jobs:\n  - {" + ", ".join(f"{k}: {v}" for k, v in job.items()) + "}\n")
    return trace


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"total_steps": "1e300"}, "total_steps"),
        ({"arrival_s": "1e300"}, "arrival_s"),
        ({"throughput": "{v100: 1e-300}"}, "throughput.v100"),
        ({"throughput": "{v100: 1e300}"}, "throughput.v100"),
        ({"slo_s": "1e300"}, "slo_s"),
        ({"total_steps": "1e14"}, "total_steps"),  # in bounds, but 317 years at 10 steps/s
    ],
)
def test_astronomical_job_files_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, str], field: str
) -> None:
    trace = _yaml(tmp_path, **fields)
    argv = ["simulate", "--quiet", "--trace", str(trace), "--cluster", "v100=1"]
    assert main([*argv, "--policy", "max_min_fairness"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field '{field}'" in err[0], err


@pytest.mark.skipif(not GAVEL_TABLE.exists(), reason="needs ../shared/data/gavel")
@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"steps": "1e300"}, "total_steps"),
        ({"arrival": "1e300"}, "arrival_time"),
        ({"slo": "1e300"}, "SLO"),
        ({"steps": str(MAX_STEPS)}, "total_steps"),  # in bounds, but far more than a year
    ],
)
def test_astronomical_gavel_lines_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, str], field: str
) -> None:
    argv = ["simulate", "--quiet", "--trace", str(_gavel(tmp_path, **line))]
    assert main([*argv, "--throughputs", str(GAVEL_TABLE), "--policy", "max_min_fairness"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"field '{field}'" in err[0], err


def _steps(trace: Path, policy: str, round_s: float, **kw: object) -> int:
    work = assemble(
        SimSettings(
            trace=str(trace),
            cluster="v100=1",
            policy=policy,
            round_seconds=round_s,
            gavel_table=str(GAVEL_TABLE),
            **kw,  # type: ignore[arg-type]
        )
    )
    result = work.simulator.run(work.specs)
    assert result.summary["completed_jobs"] == 1
    return int(result.summary["core_steps"])


def test_the_largest_accepted_job_takes_few_core_steps(tmp_path: Path) -> None:
    """Every number at its bound: the last arrival, the most steps, a run time of just
    under a year. Event-driven policies take a handful of steps; a round-based one takes
    one per round it runs, so its work is bounded by MAX_RUN_S / round length (Gavel's
    360 s rounds: ~87,000 steps, seconds; checked here with longer rounds to stay fast)."""
    rate = MAX_STEPS / MAX_RUN_S * 1.01  # steps/s: the run takes 0.99 of a year
    trace = _yaml(
        tmp_path,
        total_steps=MAX_STEPS,
        arrival_s=MAX_ARRIVAL_S,
        throughput=f"{{v100: {rate!r}}}",
        slo_s=1e9,
        priority_weight=1e6,
    )
    assert _steps(trace, "fifo_nonpreemptive", 360.0) <= 5
    assert _steps(trace, "lyra", 360.0) <= 5
    round_s = 1e5
    assert _steps(trace, "max_min_fairness", round_s) <= MAX_RUN_S / round_s + 5


@pytest.mark.skipif(not GAVEL_TABLE.exists(), reason="needs ../shared/data/gavel")
def test_a_late_gavel_job_takes_few_core_steps(tmp_path: Path) -> None:
    trace = _gavel(tmp_path, arrival=str(MAX_ARRIVAL_S))
    assert _steps(trace, "max_min_fairness", 360.0) <= 5
    assert _steps(trace, "fifo", 360.0) <= 5
