"""A job's runtime env and backend, checked without a Ray cluster: the pure
:mod:`lyra_ray.model.runtime_env` and :func:`lyra_ray.model.spec.run_options` (every
refusal names its field). Who submits (Ray job id, ownership, tokens):
``test_submitter_identity.py``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import (
    MAX_ENV_BYTES,
    MAX_ITEMS,
    MAX_TEXT,
    check_backend,
    check_runtime_env,
    inherited,
    is_uri,
    merge,
    uris,
)
from lyra_ray.model.spec import parse_job_spec, run_options

PKG = "gcs://_ray_pkg_0123456789abcdef.zip"

# ---------------------------------------------------------------------- accepted forms


@pytest.mark.parametrize(
    "env",
    [
        {"working_dir": "."},
        {"working_dir": "~/code/project"},
        {"working_dir": PKG},
        {"working_dir": "s3://bucket/code.zip"},
        {"working_dir": "https://example.com/code.zip"},
        {"py_modules": ["mylib", PKG]},
        {"py_modules": []},
        {"pip": ["torch==2.3", "numpy"]},
        {"pip": "requirements.txt"},
        {"pip": {"packages": ["numpy"]}},
        {"pip": {"packages": "requirements.txt", "pip_check": False}},
        {
            "pip": {
                "packages": ["numpy"],
                "pip_check": False,
                "pip_version": "==23.3.1",
                "pip_install_options": ["--no-cache-dir"],
            }
        },
        {"env_vars": {"A": "1", "_B2": "", "PATHLIKE": "/x:/y"}},
        {"env_vars": {}},
        {"working_dir": ".", "excludes": ["*.ckpt", "data/"]},
        {"working_dir": ".", "py_modules": ["lib"], "pip": ["x"], "env_vars": {"K": "v"}},
    ],
)
def test_client_side_forms_accepted(env: dict[str, Any]) -> None:
    assert check_runtime_env(env) == env


def test_none_is_empty_and_tuples_become_lists() -> None:
    assert check_runtime_env(None) == {}
    assert check_runtime_env({}) == {}
    out = check_runtime_env({"py_modules": ("a", "b"), "pip": ("x",)})
    assert out == {"py_modules": ["a", "b"], "pip": ["x"]}


@pytest.mark.parametrize(
    "env",
    [
        {"working_dir": PKG},
        {"py_modules": [PKG, "s3://b/m.zip"]},
        {"pip": ["numpy"]},
        {"pip": {"packages": ["numpy"], "pip_check": True}},
        {"env_vars": {"A": "b"}},
    ],
)
def test_uploaded_forms_accepted(env: dict[str, Any]) -> None:
    assert check_runtime_env(env, uploaded=True) == env


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"working_dir": "."}, "runtime_env.working_dir"),
        ({"working_dir": "/abs/dir"}, "runtime_env.working_dir"),
        ({"py_modules": [PKG, "lib"]}, "runtime_env.py_modules[1]"),
        ({"pip": "requirements.txt"}, "runtime_env.pip"),
        ({"pip": {"packages": "requirements.txt"}}, "runtime_env.pip.packages"),
        ({"working_dir": PKG, "excludes": ["x"]}, "runtime_env"),
    ],
)
def test_uploaded_requires_uris(env: dict[str, Any], field: str) -> None:
    check_runtime_env(env)  # fine as the user writes it
    with pytest.raises(InputError, match=f"field '{re.escape(field)}'") as e:
        check_runtime_env(env, uploaded=True)
    if "working_dir" in field or "py_modules" in field:
        assert "only URIs" in str(e.value)


def test_unsupported_keys_are_named() -> None:
    with pytest.raises(InputError, match=r"unsupported key\(s\) \['conda', 'container'\]"):
        check_runtime_env({"working_dir": ".", "conda": "env.yaml", "container": {}})
    with pytest.raises(InputError, match=r"field 'runtime_env': unsupported key\(s\) \['uv'\]"):
        check_runtime_env({"uv": ["x"]}, uploaded=True)
    with pytest.raises(InputError, match=r"field 'job.env': unsupported key\(s\) \['config'\]"):
        check_runtime_env({"config": {}}, field="job.env")


NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ([], "runtime_env"),
        ("working_dir=.", "runtime_env"),
        ({"working_dir": 3}, "runtime_env.working_dir"),
        ({"working_dir": INF}, "runtime_env.working_dir"),
        ({"working_dir": None}, "runtime_env.working_dir"),
        ({"working_dir": ""}, "runtime_env.working_dir"),
        ({"working_dir": "a\x00b"}, "runtime_env.working_dir"),
        ({"working_dir": "x" * (MAX_TEXT + 1)}, "runtime_env.working_dir"),
        ({"py_modules": "lib"}, "runtime_env.py_modules"),
        ({"py_modules": ["a", 1]}, "runtime_env.py_modules[1]"),
        ({"py_modules": ["m"] * (MAX_ITEMS + 1)}, "runtime_env.py_modules"),
        ({"pip": 3}, "runtime_env.pip"),
        ({"pip": NAN}, "runtime_env.pip"),
        ({"pip": True}, "runtime_env.pip"),
        ({"pip": ["numpy", NAN]}, "runtime_env.pip[1]"),
        ({"pip": [""]}, "runtime_env.pip[0]"),
        ({"pip": {"pip_check": True}}, "runtime_env.pip.packages"),
        ({"pip": {"packages": {"numpy": "1"}}}, "runtime_env.pip.packages"),
        ({"pip": {"packages": 7}}, "runtime_env.pip.packages"),
        ({"pip": {"packages": [], "extra": 1}}, "runtime_env.pip"),
        ({"pip": {"packages": [], "pip_check": NAN}}, "runtime_env.pip.pip_check"),
        ({"pip": {"packages": [], "pip_check": "yes"}}, "runtime_env.pip.pip_check"),
        ({"pip": {"packages": [], "pip_version": 23}}, "runtime_env.pip.pip_version"),
        (
            {"pip": {"packages": [], "pip_install_options": "--x"}},
            "runtime_env.pip.pip_install_options",
        ),
        ({"env_vars": ["A=1"]}, "runtime_env.env_vars"),
        ({"env_vars": {"A": 1}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"A": NAN}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"A": INF}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"A": None}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"A": True}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"A": "x" * (MAX_TEXT + 1)}}, "runtime_env.env_vars.A"),
        ({"env_vars": {"1A": "x"}}, "runtime_env.env_vars"),
        ({"env_vars": {"A-B": "x"}}, "runtime_env.env_vars"),
        ({"env_vars": {"": "x"}}, "runtime_env.env_vars"),
        ({"env_vars": {5: "x"}}, "runtime_env.env_vars"),
        ({"env_vars": {"A" * 257: "x"}}, "runtime_env.env_vars"),
        ({"env_vars": {f"V{i}": "x" for i in range(MAX_ITEMS + 1)}}, "runtime_env.env_vars"),
        ({"env_vars": {"LYRA_TOKEN": "lyra_x"}}, "runtime_env.env_vars.LYRA_TOKEN"),
        ({"env_vars": {"LYRA_TOKEN_FILE": "/t"}}, "runtime_env.env_vars.LYRA_TOKEN_FILE"),
        ({"excludes": "*.ckpt"}, "runtime_env.excludes"),
    ],
)
def test_wrong_types_name_the_field(env: Any, field: str) -> None:
    with pytest.raises(InputError, match=f"field '{re.escape(field)}'"):
        check_runtime_env(env)


def test_whole_env_size_is_bounded() -> None:
    big = {f"V{i}": "x" * MAX_TEXT for i in range(MAX_ENV_BYTES // MAX_TEXT + 1)}
    with pytest.raises(InputError, match=r"field 'runtime_env': \d+ bytes as JSON, at most"):
        check_runtime_env({"env_vars": big})


def test_token_never_travels_message() -> None:
    with pytest.raises(InputError, match="must not travel with the job"):
        check_runtime_env({"env_vars": {"LYRA_TOKEN": "lyra_x"}})


# ---------------------------------------------------------------------- backend


@pytest.mark.parametrize(
    ("raw", "want"),
    [(None, "auto"), ("auto", "auto"), ("gloo", "gloo"), ("nccl", "nccl"), ("NCCL", "nccl")],
)
def test_backend_accepted(raw: Any, want: str) -> None:
    assert check_backend(raw) == want


@pytest.mark.parametrize("raw", ["mpi", "", "nccl ", 1, NAN, True, ["gloo"], {"b": 1}])
def test_backend_refused(raw: Any) -> None:
    with pytest.raises(InputError, match=r"field 'backend': must be one of \['auto', 'gloo'"):
        check_backend(raw)


# ---------------------------------------------------------------------- spec.run_options


JOB = {"name": "j", "total_steps": 10, "throughput": {"v100": 1.0}}


def test_run_options_defaults_and_values() -> None:
    assert run_options(JOB) == ({}, "auto")
    raw = {**JOB, "runtime_env": {"working_dir": PKG, "env_vars": {"A": "1"}}, "backend": "gloo"}
    assert run_options(raw, "job 'j'", uploaded=True) == (
        {"working_dir": PKG, "env_vars": {"A": "1"}},
        "gloo",
    )


def test_run_options_names_source_and_field() -> None:
    with pytest.raises(InputError, match=r"^job 'j': field 'runtime_env.working_dir': .*local"):
        run_options({**JOB, "runtime_env": {"working_dir": "."}}, "job 'j'", uploaded=True)
    with pytest.raises(InputError, match=r"^job 'j': field 'backend'"):
        run_options({**JOB, "backend": "mpi"}, "job 'j'")


def test_parse_job_spec_checks_runtime_env_and_backend() -> None:
    spec = parse_job_spec({**JOB, "runtime_env": {"working_dir": "."}, "backend": "nccl"})
    assert spec.name == "j"
    with pytest.raises(InputError, match=r"field 'runtime_env.env_vars.A'"):
        parse_job_spec({**JOB, "runtime_env": {"env_vars": {"A": 1}}})
    with pytest.raises(InputError, match=r"unsupported key\(s\) \['conda'\]"):
        parse_job_spec({**JOB, "runtime_env": {"conda": "x"}})
    with pytest.raises(InputError, match=r"field 'backend'"):
        parse_job_spec({**JOB, "backend": "mpi"})


# ---------------------------------------------------------------------- merge, uris, inherited


def test_merge_env_vars_merge_later_wins() -> None:
    base = {"working_dir": "gcs://a.zip", "env_vars": {"A": "1", "B": "1"}, "pip": ["x"]}
    over = {"working_dir": "gcs://b.zip", "env_vars": {"B": "2", "C": "2"}}
    out = merge(base, over)
    assert out == {
        "working_dir": "gcs://b.zip",
        "env_vars": {"A": "1", "B": "2", "C": "2"},
        "pip": ["x"],
    }
    assert base["env_vars"] == {"A": "1", "B": "1"}  # inputs untouched
    assert merge({}, over) == over
    assert merge(base, {}) == base
    # three layers, as a client builds them: driver, --working-dir / SDK, the job's field
    layered = merge(merge({"env_vars": {"A": "d"}}, {"env_vars": {"A": "s"}}), {"pip": ["y"]})
    assert layered == {"env_vars": {"A": "s"}, "pip": ["y"]}


def test_uris_and_is_uri() -> None:
    env = {"working_dir": PKG, "py_modules": ["local", "s3://b/m.zip"], "pip": ["x"]}
    assert uris(env) == [PKG, "s3://b/m.zip"]
    assert uris({"working_dir": "."}) == []
    assert uris(None) == [] and uris({}) == []
    assert is_uri(PKG) and is_uri("https://h/x.zip")
    for v in ("gcs://", "/abs", "rel/dir", "gcs://a b", "GCS://x", ""):
        assert not is_uri(v), v


def test_inherited_keeps_supported_and_reports_the_rest() -> None:
    env = {
        "working_dir": PKG,
        "env_vars": {"A": "1", "LYRA_TOKEN": "lyra_secret"},
        "config": {"setup_timeout_seconds": 60},
        "excludes": ["x"],
        "conda": "env.yaml",
        "pip": [],
    }
    out, dropped = inherited(env)
    assert out == {"working_dir": PKG, "env_vars": {"A": "1"}}
    assert dropped == ["conda", "env_vars.LYRA_TOKEN"]
    out, dropped = inherited({"env_vars": {"LYRA_TOKEN_FILE": "/t"}})
    assert out == {} and dropped == ["env_vars.LYRA_TOKEN_FILE"]
    assert inherited(None) == ({}, [])


def test_requirements_files_are_read_on_the_submitting_machine(tmp_path: Any) -> None:
    """Both forms Ray accepts, ``pip: FILE`` and ``pip: {packages: FILE}``, become the
    file's list of packages (comments and blank lines dropped), the rest kept."""
    from lyra_ray.client.user_env import read_pip_files

    (tmp_path / "req.txt").write_text("numpy==1.26  # pinned\n\n# a comment\nrich\n")
    assert read_pip_files({"pip": "req.txt"}, tmp_path) == {"pip": ["numpy==1.26", "rich"]}
    env = {"pip": {"packages": "req.txt", "pip_check": False}, "env_vars": {"A": "1"}}
    out = read_pip_files(env, tmp_path)
    assert out == {
        "pip": {"packages": ["numpy==1.26", "rich"], "pip_check": False},
        "env_vars": {"A": "1"},
    }
    assert check_runtime_env(out, uploaded=True) == out
    assert read_pip_files({"pip": ["x"]}, tmp_path) == {"pip": ["x"]}
    with pytest.raises(InputError, match=r"field 'runtime_env\.pip\.packages': .*does not exist"):
        read_pip_files({"pip": {"packages": "missing.txt"}}, tmp_path)
