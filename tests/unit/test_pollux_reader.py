"""Pollux/Sia workloads and their profiles: Pollux's own speed and work, bad input refused.

A two-epoch, two-batch-size application written here has hand-computed answers; the
shipped profiles (``../shared/data``, when present) must reproduce ElasticFlow's T4
tables, which were derived from the same profiles by another team.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.sim.pollux import load_application, read_workload
from lyra_ray.sim.profiled_jobs import profiled_jobs

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tiny_profiles(root: Path) -> Path:
    """``app``: batch sizes 10 and 20 validated over two epochs; one-node placements of
    one and two workers at local batches 5 and 10."""
    d = root / "profiles" / "app"
    head = "progress,iteration,metric,grad_sqr,grad_var\n"
    _write(d / "validation-10.csv", head + "100,10,0.5,1,1\n200,20,0.6,1,3\n")
    _write(d / "validation-20.csv", head + "120,6,0.5,1,1\n180,9,0.6,1,3\n")
    _write(
        d / "placements.csv",
        "placement,local_bsz,step_time,sync_time\n"
        "1,5,1.0,0.0\n1,10,1.5,0.0\n2,5,1.2,0.2\n2,10,1.7,0.2\n",
    )
    return root / "profiles"


def test_total_work_is_pollux_progress_over_statistical_efficiency(tmp_path: Path) -> None:
    app = load_application(tiny_profiles(tmp_path) / "app")
    # progress(1) = min(100, 120), progress(2) = min(200, 180); at batch 20 (scale 2):
    # gain (var + sqr) / (var / 2 + sqr) = 4/3 then 8/5.
    assert app.total_steps(20) == pytest.approx(100 / (4 / 3) + 80 / (8 / 5))
    # between validated batch sizes the gradient statistics are interpolated
    assert app.total_steps(15) == pytest.approx(100 / 1.2 + 80 / (4 / 3))
    with pytest.raises(ValueError, match="outside the validated"):
        app.total_steps(40)


def test_step_rate_splits_the_batch_as_pollux_does(tmp_path: Path) -> None:
    app = load_application(tiny_profiles(tmp_path) / "app")
    # two workers hold batch 20 at local 10: one step of the "2" placement
    assert app.step_rate(20, 2) == pytest.approx(1 / 1.7)
    # one worker: local 20 > max 10, so one accumulation step at atomic 10
    assert app.batch_split(20, 1) == (10, 1)
    assert app.step_rate(20, 1) == pytest.approx(1 / (1.5 + 1 * (1.5 - 0.0)))
    # four workers would need local 5 on a placement nobody measured, and the two
    # measured placements give no hull to interpolate in: the profile cannot say
    assert app.step_rate(20, 4) == 0.0


@pytest.mark.skipif(not (SHARED / "pollux").is_dir(), reason="../shared/data absent")
def test_the_shipped_profiles_reproduce_elasticflows_t4_tables() -> None:
    checked = 0
    for model in ("cifar10", "deepspeech2"):
        app = load_application(SHARED / "pollux" / "profiles" / model)
        with (SHARED / "elasticflow" / "throughputs_T4" / f"{model}.csv").open() as fh:
            rows = list(csv.reader(fh))
        counts = [int(c) for c in rows[0][1:]]
        for row in rows[1:]:
            for n, cell in zip(counts, row[1:], strict=True):
                if cell and cell != "nan" and n > 1:
                    assert app.step_rate(int(row[0]), n) == pytest.approx(float(cell), rel=1e-6)
                    checked += 1
    assert checked > 15


WORKLOAD = "name,time,application,num_replicas,batch_size\nj0,5,app,2,20\nj1,0,app,1,10\n"


def test_workload_rows_become_jobs_with_their_profile_and_range(tmp_path: Path) -> None:
    profiles = tiny_profiles(tmp_path)
    trace = _write(tmp_path / "workloads" / "w.csv", WORKLOAD)
    work = profiled_jobs(trace, profiles)
    assert [s.name for s in work.specs] == ["j1", "j0"]  # arrival order
    j0 = work.specs[1]
    assert j0.arrival_s == 5.0 and j0.job_type == "app@20"
    assert j0.config["requested_workers"] == 2
    assert j0.total_steps == pytest.approx(125.0)
    # min: batch 20 at the largest measured local batch 10 needs two workers
    assert j0.min_workers == 2
    assert work.model.throughput(j0, "t4", 2) == pytest.approx(1 / 1.7)
    old = profiled_jobs(trace, profiles, rule="doubling").specs[1]
    assert (old.min_workers, old.max_workers) == (1, 4)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "header must contain"),
        ("name,time,application\nj,1,app\n", "header must contain"),
        ("name,time,application,num_replicas,batch_size\nj,soon,app,1,10\n", ":2: field 'time'"),
        ("name,time,application,num_replicas,batch_size\nj,nan,app,1,10\n", "field 'time'"),
        ("name,time,application,num_replicas,batch_size\nj,inf,app,1,10\n", "field 'time'"),
        ("name,time,application,num_replicas,batch_size\nj,1,app,0,10\n", "'num_replicas'"),
        ("name,time,application,num_replicas,batch_size\nj,1,app,1.5,10\n", "'num_replicas'"),
        ("name,time,application,num_replicas,batch_size\nj,1,,1,10\n", "'application'"),
        ("name,time,application,num_replicas,batch_size\nj,1,app,1,-4\n", "'batch_size'"),
    ],
)
def test_a_bad_workload_row_is_refused_naming_file_line_and_field(
    tmp_path: Path, text: str, match: str
) -> None:
    path = _write(tmp_path / "w.csv", text)
    with pytest.raises(InputError, match=match) as e:
        read_workload(path)
    assert str(path) in str(e.value)


def test_an_unknown_application_or_batch_is_refused(tmp_path: Path) -> None:
    profiles = tiny_profiles(tmp_path)
    head = "name,time,application,num_replicas,batch_size\n"
    trace = _write(tmp_path / "w.csv", head + "j,0,gpt9,1,10\n")
    with pytest.raises(InputError, match=r"w.csv:2: field 'application'"):
        profiled_jobs(trace, profiles)
    trace.write_text(head + "j,0,app,1,400\n")
    with pytest.raises(InputError, match=r"w.csv:2: field 'batch_size'"):
        profiled_jobs(trace, profiles)


def test_a_bad_profile_is_refused_naming_its_file(tmp_path: Path) -> None:
    profiles = tiny_profiles(tmp_path)
    _write(
        profiles / "app" / "placements.csv", "placement,local_bsz,step_time,sync_time\n1,5,x,0\n"
    )
    with pytest.raises(InputError, match=r"placements.csv:2: field 'step_time'"):
        load_application(profiles / "app")
