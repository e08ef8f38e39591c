"""``lyra submit --wait`` under ``ray job stop``, without Ray: a fake client.

:class:`StopSignals` holds a signal until it is armed (the job ids are known), then
interrupts the wait; :func:`cancel_on_stop` cancels every job not yet ended, keeps
going past one it cannot cancel, says what it did and exits 128 + the signal.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from lyra_ray.cli.stop import Stopped, StopSignals, cancel_on_stop


class FakeClient:
    def __init__(self, statuses: dict[str, str], broken: frozenset[str] = frozenset()) -> None:
        self.statuses = statuses
        self.broken = broken
        self.cancelled: list[str] = []

    def status(self, jid: str) -> dict[str, Any]:
        from lyra_ray.sdk import LyraError

        if jid in self.broken:
            raise LyraError(f"scheduler unreachable for {jid}")
        return {"id": jid, "status": self.statuses[jid]}

    def cancel(self, jid: str) -> None:
        self.cancelled.append(jid)
        self.statuses[jid] = "cancelled"


def test_signal_before_arm_is_held_then_raised() -> None:
    stop = StopSignals(True)
    stop._handle(signal.SIGTERM, None)  # during the submission: held, not raised
    assert stop.signum == signal.SIGTERM and not stop.armed
    with pytest.raises(Stopped) as e:
        stop.arm()
    assert e.value.signum == signal.SIGTERM


def test_armed_handler_raises() -> None:
    stop = StopSignals(True)
    stop.arm()  # nothing received yet: no raise
    with pytest.raises(Stopped) as e:
        stop._handle(signal.SIGINT, None)
    assert e.value.signum == signal.SIGINT


def test_inactive_installs_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals(False) as stop:
        assert signal.getsignal(signal.SIGTERM) is before
        assert stop._old == {}


def test_real_sigterm_interrupts_the_wait_and_handlers_are_restored() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with StopSignals(True) as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._handle
        os.kill(os.getpid(), signal.SIGTERM)  # not armed: held
        assert stop.signum == signal.SIGTERM
        with pytest.raises(Stopped):
            stop.arm()
        with pytest.raises(Stopped) as e:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # never sleeps through: the handler's raise ends it
        assert e.value.signum == signal.SIGINT
    assert {s: signal.getsignal(s) for s in before} == before


def test_cancel_on_stop_cancels_every_live_job(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"j1": "running", "j2": "finished", "j3": "queued", "j4": "failed"})
    code = cancel_on_stop(c, ["j1", "j2", "j3", "j4"], signal.SIGTERM)
    assert code == 128 + signal.SIGTERM != 0
    assert c.cancelled == ["j1", "j3"]
    out = capsys.readouterr().out
    assert f"stopped by signal {int(signal.SIGTERM)}: cancelled 2 lyra job(s)" in out
    assert "'j1', 'j3'" in out


def test_cancel_on_stop_goes_on_past_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"a": "running", "b": "running", "c": "running"}, frozenset({"b"}))
    code = cancel_on_stop(c, ["a", "b", "c"], signal.SIGINT)
    assert code == 128 + signal.SIGINT
    assert c.cancelled == ["a", "c"]
    captured = capsys.readouterr()
    assert "lyra: could not cancel b: scheduler unreachable for b" in captured.err
    assert "cancelled 2 lyra job(s)" in captured.out


def test_cancel_on_stop_with_nothing_left(capsys: pytest.CaptureFixture[str]) -> None:
    c = FakeClient({"a": "finished"})
    assert cancel_on_stop(c, ["a"], signal.SIGTERM) == 128 + signal.SIGTERM
    assert c.cancelled == []
    assert "cancelled 0 lyra job(s) []" in capsys.readouterr().out
