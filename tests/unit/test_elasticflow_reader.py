"""ElasticFlow's per-type tables as speed curves, and the per-type mapping of a job."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.sim.elasticflow import read_table, read_tables
from lyra_ray.sim.pollux import load_application
from lyra_ray.sim.profiled_jobs import ratio, speed_curves
from tests.unit.test_pollux_reader import tiny_profiles

TABLE = "global_batch_size,1,2,4,8\n64,2.0,3.0,5.0,\n128,1.0,1.8,3.2,nan\n"


def _tables(root: Path) -> Path:
    for gpu, rows in (("A100", "64,8.0,12.0\n"), ("T4", "64,2.0,3.0\n")):
        d = root / f"throughputs_{gpu}"
        d.mkdir(parents=True)
        (d / "ref.csv").write_text("global_batch_size,1,2\n" + rows)
    (root / "throughputs_T4" / "app.csv").write_text("global_batch_size,1,2\n20,5.0,9.0\n")
    return root


def test_a_table_reads_iterations_per_second_by_batch_and_count(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text(TABLE)
    t = read_table(tmp_path / "m.csv", "a100")
    assert t.rows[64] == {1: 2.0, 2: 3.0, 4: 5.0}  # an empty cell is not measured
    assert 8 not in t.rows[128]  # nor is nan
    assert t.step_rate(64, 2) == 3.0
    # between measured counts, samples/s interpolated linearly: 3 workers
    assert t.step_rate(64, 3) == pytest.approx(4.0)
    # past the last measured count the model cannot run
    assert t.step_rate(64, 8) == 0.0
    # another batch keeps the samples/s of the largest measured batch below it
    assert t.step_rate(256, 1) == pytest.approx(1.0 * 128 / 256)
    assert t.step_rate(32, 1) == pytest.approx(2.0 * 64 / 32)  # below all: the smallest


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("batch,1\n64,1\n", "1: header must be"),
        ("global_batch_size,1,two\n64,1,1\n", "1: field 'two'"),
        ("global_batch_size,1\n64,-1\n", "2: field '1': must be a finite"),
        ("global_batch_size,1\n64,inf\n", "2: field '1': must be a finite"),
        ("global_batch_size,1\n64,fast\n", "2: field '1': not a number"),
        ("global_batch_size,1\nbig,1\n", "2: field 'global_batch_size'"),
        ("global_batch_size,1\n64,1\n64,2\n", "given twice"),
        ("global_batch_size,1\n64,0\n", "no measured throughput"),
    ],
)
def test_a_bad_table_is_refused_naming_file_line_and_field(
    tmp_path: Path, text: str, match: str
) -> None:
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(InputError, match=match) as e:
        read_table(tmp_path / "m.csv", "t4")
    assert "m.csv" in str(e.value)


def test_types_come_from_the_folders_and_the_mapping_is_the_stated_one(tmp_path: Path) -> None:
    tables = read_tables(_tables(tmp_path / "ef"))
    assert set(tables) == {"a100", "t4"}
    assert ratio(tables, "a100", "ref") == pytest.approx(4.0)
    app = load_application(tiny_profiles(tmp_path) / "app")
    curves = speed_curves(app, 20, tables, reference="ref")
    # measured on T4 only: the Pollux profile there, times the reference's 4x on A100
    assert curves["t4"][2] == pytest.approx(1 / 1.7)
    assert curves["a100"][2] == pytest.approx(4 / 1.7)
    # measured on every type: the tables themselves
    (tmp_path / "ef" / "throughputs_A100" / "app.csv").write_text(
        "global_batch_size,1,2\n20,50.0,90.0\n"
    )
    both = speed_curves(app, 20, read_tables(tmp_path / "ef"), reference="ref")
    assert both["a100"][2] == 90.0 and both["t4"][2] == 9.0
    with pytest.raises(InputError, match="reference model 'nope'"):
        speed_curves(app, 20, tables, reference="nope")


def test_a_directory_without_tables_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no throughputs_<TYPE>"):
        read_tables(tmp_path)
