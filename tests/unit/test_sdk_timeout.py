"""A scheduler that does not answer in time is one line naming the call, not a traceback.

The SDK waits ``timeout`` for each call and retries for ``retry_s``; past that, a Ray
``GetTimeoutError`` becomes a :class:`LyraError` naming the call and the wait, and the
CLI's entry point prints it as ``lyra: error: ...`` with exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from lyra_ray import sdk  # noqa: E402
from lyra_ray.sdk import Client, LyraError  # noqa: E402

cli_main = importlib.import_module("lyra_ray.cli.main")  # the package exports main()


class _Method:
    def remote(self, *args: Any, **kw: Any) -> object:
        return object()


class _Actor:
    overview = _Method()


def test_a_call_unanswered_in_time_names_the_call_and_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def get(ref: object, timeout: float | None = None) -> Any:
        raise ray.exceptions.GetTimeoutError("Get timed out: some object(s) not ready.")

    monkeypatch.setattr(sdk.ray, "get", get)
    client = Client.__new__(Client)
    client.retry_s, client.token, client._actor = 0.0, None, _Actor()
    with pytest.raises(LyraError, match=r"did not answer 'overview' within 60 s"):
        client.overview()


def test_the_cli_prints_a_lyra_error_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise LyraError("the scheduler did not answer 'overview' within 60 s")

    parser = argparse.ArgumentParser()
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.set_defaults(func=fails)
    monkeypatch.setattr(cli_main, "build_parser", lambda command: parser)
    assert cli_main.main([]) == 1
    err = capsys.readouterr().err
    assert err == "lyra: error: the scheduler did not answer 'overview' within 60 s\n"
