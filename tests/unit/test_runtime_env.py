"""A job's runtime env, backend, origin and token, checked without a Ray cluster.

Pure parts: :mod:`lyra_ray.model.runtime_env` and :func:`lyra_ray.model.spec.run_options`
(every refusal names its field); ``ray_job_id`` of :mod:`lyra_ray.runtime.user_env`
from a fake environment; :func:`lyra_ray.runtime.boundary.owned` and ``check_origin``;
:func:`lyra_ray.runtime.home.resolve_token`'s precedence.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
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
from lyra_ray.runtime.auth import OPEN, Identity
from lyra_ray.runtime.home import resolve_token, token_path, write_token
from lyra_ray.runtime.user_env import JOB_CONFIG_ENV, ray_job_id

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
        ({"pip": {"packages": "requirements.txt"}}, "runtime_env.pip.packages"),
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


# ---------------------------------------------------------------------- ray_job_id


def _config(payload: Any) -> dict[str, str]:
    return {JOB_CONFIG_ENV: payload if isinstance(payload, str) else json.dumps(payload)}


@pytest.mark.parametrize(
    ("environ", "want"),
    [
        (_config({"metadata": {"job_submission_id": "raysubmit_AbC123"}}), "raysubmit_AbC123"),
        (_config({"runtime_env": {}, "metadata": {"job_submission_id": "x"}}), "x"),
        ({}, None),
        ({JOB_CONFIG_ENV: ""}, None),
        ({"OTHER": "1"}, None),
        (_config("{not json"), None),
        (_config("[1, 2]"), None),
        (_config("null"), None),
        (_config('"text"'), None),
        (_config({"metadata": None}), None),
        (_config({"metadata": "raysubmit_x"}), None),
        (_config({"metadata": {}}), None),
        (_config({"metadata": {"job_submission_id": ""}}), None),
        (_config({"metadata": {"job_submission_id": 12}}), None),
        (_config({}), None),
    ],
)
def test_ray_job_id(environ: dict[str, str], want: str | None) -> None:
    assert ray_job_id(environ) == want


def test_ray_job_id_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"metadata": {"job_submission_id": "r1"}}))
    assert ray_job_id() == "r1"
    monkeypatch.delenv(JOB_CONFIG_ENV)
    assert ray_job_id() is None


def test_user_env_imports_without_ray() -> None:
    """Importing user_env (the SDK does at every Client) loads Ray only when it uploads."""
    code = (
        "import sys, lyra_ray.runtime.user_env as u\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
        "print(u.ray_job_id({}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


# ---------------------------------------------------------------------- boundary


def test_owned() -> None:
    from lyra_ray.runtime.boundary import owned

    raw = {"name": "j", "user": "bob"}
    assert owned(raw, OPEN) is raw  # open: as written
    alice = Identity("alice", False)
    assert owned({"name": "j"}, alice)["user"] == "alice"
    assert owned({"name": "j", "user": "default"}, alice)["user"] == "alice"
    assert owned({"name": "j", "user": "alice"}, alice)["user"] == "alice"
    with pytest.raises(InputError, match=r"^job 'j': field 'user': .*you are 'alice'.*'bob'"):
        owned(raw, alice)
    with pytest.raises(InputError, match="field 'user'"):  # admins too submit as themselves
        owned(raw, Identity("root", True))
    assert owned(["not", "a", "job"], alice) == ["not", "a", "job"]
    assert raw == {"name": "j", "user": "bob"}  # the input is not modified


def test_check_origin() -> None:
    from lyra_ray.runtime.boundary import check_origin

    assert check_origin(None) == {}
    assert check_origin({}) == {}
    assert check_origin({"ray_job": None}) == {}
    assert check_origin({"ray_job": "raysubmit_AbC.1:2-3"}) == {"ray_job": "raysubmit_AbC.1:2-3"}
    for bad in (["ray_job"], "raysubmit_1", {"ray_job": "x", "other": 1}):
        with pytest.raises(InputError, match=r"field 'origin':"):
            check_origin(bad)
    for rj in ("", "a b", "x" * 129, 12, "a\nb", ["x"]):
        with pytest.raises(InputError, match=r"field 'origin.ray_job'"):
            check_origin({"ray_job": rj})
    with pytest.raises(InputError) as e:
        check_origin({"ray_job": "é" * 10_000})
    assert len(str(e.value)) <= 300


def test_job_meta_ownership(tmp_path: Path) -> None:
    from lyra_ray.runtime.auth import AuthError
    from lyra_ray.runtime.boundary import JobMeta
    from lyra_ray.runtime.store import StateStore

    store = StateStore(tmp_path)
    try:
        store.enqueue("submit", "j1", {}, meta={"ray_job": "r1"}, owner="alice")
        store.enqueue("submit", "j2", {}, meta={}, owner="bob")
        jm = JobMeta(store)
        jm.put("j3", None, {})
        alice, root = Identity("alice", False), Identity("root", True)
        rows = [{"id": "j1"}, {"id": "j2"}, {"id": "j3"}]
        assert jm.visible(rows, alice) == [{"id": "j1", "owner": "alice", "ray_job": "r1"}]
        assert [r["id"] for r in jm.visible(rows, root)] == ["j1", "j2", "j3"]
        assert [r["id"] for r in jm.visible(rows, OPEN)] == ["j1", "j2", "j3"]
        jm.check_access("j1", alice)
        for jid in ("j2", "j3", "unknown"):
            with pytest.raises(AuthError, match="only its owner or an admin"):
                jm.check_access(jid, alice)
            jm.check_access(jid, root)
        jm.put("j1", "mallory", {})  # the first owner stays
        assert jm.owner("j1") == "alice" and jm.meta("j1") == {"ray_job": "r1"}
    finally:
        store.close()


# ---------------------------------------------------------------------- resolve_token


def test_resolve_token_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text("from-home\n")
    named = tmp_path / "named"
    named.write_text("  from-file \n")
    env = {"LYRA_HOME": str(home)}
    assert resolve_token({**env, "LYRA_TOKEN": " from-env ", "LYRA_TOKEN_FILE": str(named)}) == (
        "from-env"
    )
    assert resolve_token({**env, "LYRA_TOKEN": "  ", "LYRA_TOKEN_FILE": str(named)}) == (
        "from-file"
    )
    assert resolve_token({**env, "LYRA_TOKEN_FILE": str(named)}) == "from-file"
    assert resolve_token(env) == "from-home"
    # a file named on purpose is the only one read: no fallback to another identity
    assert resolve_token({**env, "LYRA_TOKEN_FILE": str(tmp_path / "missing")}) is None
    (home / "token").write_text("\n")
    assert resolve_token(env) is None
    assert resolve_token({"LYRA_HOME": str(tmp_path / "nowhere")}) is None


def test_resolve_token_default_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_token({}) is None
    (tmp_path / ".lyra").mkdir()
    (tmp_path / ".lyra" / "token").write_text("tok\n")
    assert resolve_token({}) == "tok"


def test_resolve_token_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYRA_TOKEN", "env-token")
    assert resolve_token() == "env-token"


def test_write_token_is_private(tmp_path: Path) -> None:
    p = write_token("lyra_secret", str(tmp_path / "h"))
    assert p == token_path(str(tmp_path / "h"))
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert resolve_token({"LYRA_HOME": str(tmp_path / "h")}) == "lyra_secret"
    p.chmod(0o644)
    write_token("lyra_other", str(tmp_path / "h"))  # rewritten: narrowed again
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert p.read_text() == "lyra_other\n"
