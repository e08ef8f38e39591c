"""The entrypoint check's timeout counts the user's import alone, not the worker's start.

Ray is replaced by a virtual clock: the check's generator task yields "started" after
``start_s`` and its answer ``import_s`` later; ``ray.wait`` advances the clock. Why: under
a one-core CPU hog a fresh worker took longer than the tests' 15-s timeout to start and
load PyTorch, and an importable job was refused as "did not finish" (docs/testing.md).
"""

from __future__ import annotations

from typing import Any

import pytest

ec = pytest.importorskip("lyra_ray.runtime.entrypoint_check")


class _Clock:
    def __init__(self, start_s: float, import_s: float, answer: str | None) -> None:
        self.now = 0.0
        self.items = [(start_s, ec.STARTED), (start_s + import_s, answer)]
        self.cancelled = False


class _Gen:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def __next__(self) -> Any:
        return self.clock.items.pop(0)[1]


def _check(monkeypatch: pytest.MonkeyPatch, start_s: float, import_s: float) -> tuple[Any, Any]:
    clock = _Clock(start_s, import_s, None)

    def wait(gens: list[_Gen], timeout: float) -> tuple[list[_Gen], list[_Gen]]:
        at = clock.items[0][0]
        if at <= clock.now + timeout:
            clock.now = max(clock.now, at)
            return gens, []
        clock.now += timeout
        return [], gens

    def cancel(gen: _Gen, force: bool) -> None:
        clock.cancelled = force

    class _Task:
        def options(self, **_: Any) -> _Task:
            return self

        def remote(self, _entrypoint: str) -> _Gen:
            return _Gen(clock)

    monkeypatch.setattr(ec.ray, "wait", wait)
    monkeypatch.setattr(ec.ray, "get", lambda value: value)
    monkeypatch.setattr(ec.ray, "cancel", cancel)
    monkeypatch.setattr(ec, "_import_entrypoint", _Task())
    return ec.EntrypointChecker(15.0).check("mine:train", None), clock


def test_a_slow_worker_start_does_not_count_against_the_import() -> None:
    with pytest.MonkeyPatch.context() as mp:
        error, clock = _check(mp, start_s=40.0, import_s=2.0)  # 42 s in all, > 15 s
    assert error is None and not clock.cancelled


def test_an_import_past_the_timeout_is_stopped_naming_the_field() -> None:
    with pytest.MonkeyPatch.context() as mp:
        error, clock = _check(mp, start_s=1.0, import_s=20.0)
    assert error is not None and error.startswith("field 'entrypoint': importing")
    assert "did not finish within 15 s" in error and clock.cancelled


def test_a_worker_that_never_starts_is_stopped_after_the_start_bound() -> None:
    with pytest.MonkeyPatch.context() as mp:
        error, clock = _check(mp, start_s=ec.START_S + 1.0, import_s=1.0)
    assert error is not None and f"did not start within {ec.START_S:.0f} s" in error
    assert clock.cancelled
