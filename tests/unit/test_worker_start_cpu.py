"""``benchmarks/worker_start_cpu.py``'s arithmetic and its refusal of bad arguments; the
measurement itself starts Ray worker processes and is run as a benchmark, not here."""

from __future__ import annotations

import pytest

from benchmarks._worker_start_table import render
from benchmarks.worker_start_cpu import main, summarise


def test_each_kind_is_its_median_and_its_ratio_to_the_bare_worker() -> None:
    out = summarise({"bare": [0.9, 0.8, 1.0], "torch": [2.4, 2.0, 2.6, 9.0]})
    assert out["bare"]["median_cpu_s"] == 0.9
    assert out["torch"]["median_cpu_s"] == 2.5  # one slow outlier does not move it
    assert out["torch"]["vs_bare"] == pytest.approx(2.5 / 0.9, abs=0.01)
    assert out["torch"]["samples"] == [2.4, 2.0, 2.6, 9.0]


def test_the_table_shows_the_newest_run() -> None:
    run = {
        "at": "t",
        "commit": "c",
        "rounds": 3,
        "calibration_s": 0.1,
        "note": "",
        "kinds": summarise({"bare": [1.0], "torch": [2.5]}),
    }
    text = render({"runs": [{**run, "commit": "old"}, run]})
    assert "commit c," in text and "old" not in text
    assert "| torch | 2.50 | 2.50x |" in text


@pytest.mark.parametrize("bad", ["0", "101", "2.5", "nan", "many"])
def test_bad_rounds_name_the_field(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--rounds", bad])
    assert "--rounds" in capsys.readouterr().err
