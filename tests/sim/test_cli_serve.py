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
        ("name: dense\nimport_path: a:app\nmin_servers: 0\n", "'min_servers'"),
        ("name: dense\n", "'import_path'"),
        ("name: dense\nimport_path: a:app\nruntime_env: {conda: x}\n", "'runtime_env'"),
        (  # a Serve config: every field lyra does not carry out is refused by name
            "applications:\n- {name: d, import_path: a:app, host: 0.0.0.0}\n",
            "unknown field(s) ['host']",
        ),
        ("http_options: {port: 1}\napplications: []\n", "['http_options']"),
        (
            "applications:\n- {name: d, import_path: a:app, lyra: {min_servers: 0}}\n",
            "'applications[0].lyra.min_servers'",
        ),
        (
            "applications:\n- name: d\n  import_path: a:app\n"
            "  deployments: [{name: M, max_ongoing_request: 3}]\n",
            "['max_ongoing_request']",
        ),
        (
            "applications:\n- {name: d, import_path: a:app, route_prefix: /_lyra/x}\n",
            "'applications[0].route_prefix'",
        ),
    ],
)
def test_serve_deploy_bad_file(
    tmp_path: Path, text: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "svc.yaml"
    f.write_text(text)
    assert main(["serve", "deploy", str(f)]) == 2
    assert needle in capsys.readouterr().err


def test_serve_deploy_local_working_dir_must_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A working_dir is read on this machine (relative to the file): a missing one is
    refused before any cluster is reached."""
    f = tmp_path / "svc.yaml"
    f.write_text("name: d\nimport_path: a:app\nruntime_env: {working_dir: ./nowhere}\n")
    assert main(["serve", "deploy", str(f), "--address", "127.0.0.1:1"]) == 2
    assert "runtime_env.working_dir" in capsys.readouterr().err


def test_serve_deploy_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "deploy", "/nonexistent/svc.yaml"]) == 2
    assert "cannot read" in capsys.readouterr().err
