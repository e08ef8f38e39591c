"""Who submits a job, as the live boundary sees it (#16): the Ray job id a driver runs as
(:func:`lyra_ray.client.user_env.ray_job_id`, from a fake environment), ownership
(:func:`lyra_ray.runtime.boundary.owned`, ``check_origin``, ``JobMeta``) and which lyra
token a client sends (:func:`lyra_ray.client.home.resolve_token`). No Ray cluster."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.client.home import resolve_token, token_path, write_token
from lyra_ray.client.user_env import JOB_CONFIG_ENV, ray_job_id
from lyra_ray.model.errors import InputError
from lyra_ray.runtime.auth import OPEN, Identity

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
        "import sys, lyra_ray.client.user_env as u\n"
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
        assert jm.visible(rows, alice) == [
            {"id": "j1", "owner": "alice", "ray_job": "r1", "team": None}
        ]
        assert [r["id"] for r in jm.visible(rows, root)] == ["j1", "j2", "j3"]
        assert [r["id"] for r in jm.visible(rows, OPEN)] == ["j1", "j2", "j3"]
        assert jm.may_access("j1", alice)
        for jid in ("j2", "j3", "unknown"):
            assert not jm.may_access(jid, alice)
            assert jm.may_access(jid, root) and jm.may_access(jid, OPEN)
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
