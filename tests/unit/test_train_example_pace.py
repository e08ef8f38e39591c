"""The example job's ``pace_file``: what the live tests use to let a job finish once
they have seen what it was there for (issue 47), so it must follow the file at once and
never be thrown by a bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from lyra_ray.jobs.train_example import _Pace


def test_without_a_file_the_configured_pause_holds(tmp_path: Path) -> None:
    assert _Pace(None, 0.1).now() == 0.1
    assert _Pace(str(tmp_path / "absent"), 0.1).now() == 0.1


def test_the_file_replaces_the_pause_from_the_next_step_on(tmp_path: Path) -> None:
    f = tmp_path / "pace"
    pace = _Pace(str(f), 0.1)
    assert pace.now() == 0.1
    f.write_text("0")
    assert pace.now() == 0.0
    f.write_text("0.25\n")
    assert pace.now() == 0.25


@pytest.mark.parametrize("text", ["", "fast", "nan", "inf", "-inf", "1e400"])
def test_a_file_without_a_finite_number_keeps_the_last_pause(tmp_path: Path, text: str) -> None:
    f = tmp_path / "pace"
    pace = _Pace(str(f), 0.1)
    f.write_text("0.2")
    assert pace.now() == 0.2
    f.write_text(text)
    assert pace.now() == 0.2


def test_a_negative_pause_is_no_pause(tmp_path: Path) -> None:
    f = tmp_path / "pace"
    f.write_text("-3")
    assert _Pace(str(f), 0.1).now() == 0.0
