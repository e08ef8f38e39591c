"""`lyra serve ...` refuses bad input before it touches a cluster: exit 2, one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.cli import main


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--peak-rps", "nan", "--duration-s", "10"], "peak_rps"),
        (["--peak-rps", "-3", "--duration-s", "10"], "peak_rps"),
        (["--peak-rps", "10", "--duration-s", "inf"], "duration_s"),
        (["--peak-rps", "10", "--duration-s", "0"], "duration_s"),
        (["--peak-rps", "1e9", "--duration-s", "10"], "peak_rps"),
        (["--peak-rps", "10", "--duration-s", "10", "--period-s", "-1"], "period_s"),
    ],
)
def test_serve_load_bad_numbers(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "load", "dense", *args]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty file"),
        ("name: [unclosed", "malformed YAML"),
        ("- a\n- b\n", "mapping"),
        ("name: dense\nmodel: gpt\n", "'model'"),
        ("name: dense\nmin_servers: 0\n", "'min_servers'"),
    ],
)
def test_serve_deploy_bad_file(
    tmp_path: Path, text: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "svc.yaml"
    f.write_text(text)
    assert main(["serve", "deploy", str(f)]) == 2
    assert needle in capsys.readouterr().err


def test_serve_deploy_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "deploy", "/nonexistent/svc.yaml"]) == 2
    assert "cannot read" in capsys.readouterr().err
