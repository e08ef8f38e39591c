"""``benchmarks/suite_times.py``: a run's wall time from its phases' JUnit files, whether
the phases ran one after another (``make test``) or beside each other (a trial of that
design, docs/testing.md)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.suite_times import read_junit


def _junit(path: Path, start: str | None, took: float, cases: dict[str, float]) -> Path:
    stamp = f' timestamp="{start}"' if start else ""
    body = "".join(
        f'<testcase classname="tests.unit.test_suite_times" name="{m}" time="{t}" />'
        for m, t in cases.items()
    )
    path.write_text(
        f'<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" '
        f'tests="{len(cases)}" time="{took}"{stamp}>{body}</testsuite></testsuites>'
    )
    return path


def test_phases_one_after_another_add_up(tmp_path: Path) -> None:
    a = _junit(tmp_path / "a.xml", "2026-12-01T10:00:00+00:00", 600.0, {"x": 300.0})
    b = _junit(tmp_path / "b.xml", "2026-12-01T10:10:00+00:00", 120.0, {"y": 120.0})
    assert read_junit(a, b)["wall_s"] == 720.0


def test_phases_beside_each_other_count_once(tmp_path: Path) -> None:
    a = _junit(tmp_path / "a.xml", "2026-12-01T10:00:00+00:00", 600.0, {"x": 1000.0})
    b = _junit(tmp_path / "b.xml", "2026-12-01T10:00:05+00:00", 400.0, {"y": 400.0})
    c = _junit(tmp_path / "c.xml", "2026-12-01T10:10:30+00:00", 100.0, {"z": 100.0})
    run = read_junit(a, b, c)
    assert run["wall_s"] == 730.0  # 10:00:00 to 10:12:10
    assert run["tiers"]["unit"]["seconds"] == 1500.0  # the tests' own seconds still add up


def test_a_file_without_a_start_falls_back_to_the_sum(tmp_path: Path) -> None:
    a = _junit(tmp_path / "a.xml", None, 60.0, {"x": 60.0})
    b = _junit(tmp_path / "b.xml", "2026-12-01T10:00:00+00:00", 30.0, {"y": 30.0})
    assert read_junit(a, b)["wall_s"] == 90.0
