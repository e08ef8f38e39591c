"""Admission: every bound on what a job may ask, through every reader that makes a job,
and the one check of the cluster that both drivers call (lyra_ray/model/admission.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.model import JobSpec, ThroughputModel
from lyra_ray.model.admission import (
    MAX_ARRIVAL_S,
    MAX_RUN_S,
    MAX_STEPS,
    check_admissible,
    check_bounds,
)
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.sim.traces import read_gavel_trace, read_philly_csv

BASE: dict[str, Any] = {"name": "a", "total_steps": 100, "throughput": {"v100": 10}}
BAD_NUMBERS = [math.nan, math.inf, -math.inf, 1e300, -1.0, "ten", True, None, [], 10**400]


@pytest.mark.parametrize(
    "field",
    ["total_steps", "arrival_s", "slo_s", "priority_weight", "keep_when_shared"],
)
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_a_job_files_numbers_are_bounded(field: str, value: Any) -> None:
    raw = {**BASE, field: value}
    if value is None and field in ("slo_s", "keep_when_shared"):
        parse_job_spec(raw)  # optional: None is "not given"
        return
    with pytest.raises(InputError, match=f"field '{field}'") as e:
        parse_job_spec(raw, source="jobs.yaml: jobs[0]")
    assert "\n" not in str(e.value) and str(e.value).startswith("jobs.yaml: jobs[0]")


@pytest.mark.parametrize("value", [0, -1, 1e300, math.nan, 10**30, "many", 2.5])
@pytest.mark.parametrize("field", ["workers", "min_workers", "max_workers"])
def test_worker_counts_are_bounded(field: str, value: Any) -> None:
    with pytest.raises(InputError, match="workers'"):
        parse_job_spec({**BASE, field: value})


@pytest.mark.parametrize("rate", [0, -1, 1e-300, 1e300, math.nan, math.inf, "fast"])
def test_declared_rates_are_bounded(rate: Any) -> None:
    with pytest.raises(InputError, match="throughput"):
        parse_job_spec({**BASE, "throughput": {"v100": rate}})
    with pytest.raises(InputError, match="throughput"):
        parse_job_spec({**BASE, "throughput": {}})  # empty


def test_the_bounds_themselves_are_accepted() -> None:
    spec = parse_job_spec(
        {**BASE, "total_steps": MAX_STEPS, "arrival_s": MAX_ARRIVAL_S, "priority_weight": 1e6}
    )
    assert spec.total_steps == MAX_STEPS
    with pytest.raises(InputError, match=r"field 'total_steps'.*at most|in \[0, 1e\+15\]"):
        parse_job_spec({**BASE, "total_steps": MAX_STEPS * 1.0001})


def _gavel_line(steps: str = "100", sf: str = "1", slo: str = "-1", arrival: str = "0") -> str:
    return f"ResNet-18\tcmd\tdir\t-n\t1\t{steps}\t{sf}\t1\t{slo}\t{arrival}\n"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (_gavel_line(steps="1e300"), "total_steps"),
        (_gavel_line(arrival="1e300"), "arrival_time"),
        (_gavel_line(slo="1e300"), "SLO"),
        (_gavel_line(sf="2000000"), "scale_factor"),
        (_gavel_line(steps="nan"), "total_steps"),
        (_gavel_line(arrival="-5"), "arrival_time"),
    ],
)
def test_a_gavel_trace_line_is_bounded_naming_its_field(
    tmp_path: Path, line: str, field: str
) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(_gavel_line() + line)
    with pytest.raises(InputError, match=rf"t\.trace:2: field '{field}'"):
        read_gavel_trace(trace)


def test_a_philly_row_is_bounded_naming_its_field(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text(
        "timestamp,duration,num_gpus\n2017-10-01 00:00:00,100,1\n2017-10-02 00:00:00,1e300,1\n"
    )
    with pytest.raises(InputError, match=r"p\.csv:3: field 'duration'"):
        read_philly_csv(csv)
    csv.write_text(
        "timestamp,duration,num_gpus\n2017-10-01 00:00:00,100,1\n2099-10-02 00:00:00,100,1\n"
    )
    with pytest.raises(InputError, match=r"p\.csv:3: field 'timestamp'"):
        read_philly_csv(csv)


def test_a_spec_made_by_hand_is_checked_alike() -> None:
    check_bounds(JobSpec("a", 10.0, throughput={"v100": 1.0}), "x")
    with pytest.raises(InputError, match="x: field 'total_steps'"):
        check_bounds(JobSpec("a", math.nan, throughput={"v100": 1.0}), "x")
    with pytest.raises(InputError, match="x: field 'total_steps': must be > 0"):
        check_bounds(JobSpec("a", 0.0, throughput={"v100": 1.0}), "x")


MODEL = ThroughputModel()


def test_the_minimum_must_fit_on_one_type_the_job_can_run_on() -> None:
    spec = JobSpec("a", 10.0, min_workers=5, max_workers=5, throughput={"v100": 1.0})
    check_admissible(spec, {"v100": 5}, MODEL, "j")
    with pytest.raises(InputError, match="j: field 'min_workers': needs 5 GPUs"):
        check_admissible(spec, {"v100": 4, "k80": 64}, MODEL, "j")
    with pytest.raises(InputError, match="field 'workers'"):  # as the input wrote it
        check_admissible(spec, {"k80": 64}, MODEL, "j", field="workers")


def test_a_job_may_run_a_year_at_its_best_rate_and_no_longer() -> None:
    rate = 10.0
    year = JobSpec("a", rate * MAX_RUN_S, throughput={"v100": rate, "k80": 1e-6})
    check_admissible(year, {"v100": 1, "k80": 8}, MODEL, "j")
    longer = JobSpec("a", rate * MAX_RUN_S * 1.01, throughput={"v100": rate})
    with pytest.raises(InputError, match=r"j: field 'total_steps': .* at most .*one year"):
        check_admissible(longer, {"v100": 1}, MODEL, "j")
    # an elastic job's best rate uses as many workers as it may and the type holds
    elastic = JobSpec("a", 4 * rate * MAX_RUN_S, max_workers=8, throughput={"v100": rate})
    check_admissible(elastic, {"v100": 4}, MODEL, "j")
    with pytest.raises(InputError, match="field 'total_steps'"):
        check_admissible(elastic, {"v100": 2}, MODEL, "j")
