"""A host cluster's node start (``node_start.start_retried``): tried again after the
transient failures Ray reports under load, not after any other, its failed tries'
process groups forgotten and the log kept whole; a head's start too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lyra_ray.ops import host_cluster
from lyra_ray.ops.embedded import START_TRIES
from lyra_ray.ops.host_cluster import HostCluster
from lyra_ray.ops.node_start import start_retried

FLAKY = """
import sys
from pathlib import Path
n = Path(sys.argv[1])
tries = int(n.read_text()) if n.exists() else 0
n.write_text(str(tries + 1))
if tries < int(sys.argv[2]):
    print(sys.argv[3])
    raise SystemExit(1)
print("started")
"""


def _start(tmp_path: Path, fails: int, said: str) -> tuple[bool, list[int], list[int], Path]:
    count, log = tmp_path / "count", tmp_path / "worker.log"
    argv = [sys.executable, "-c", FLAKY, str(count), str(fails), said]
    groups: list[int] = []
    forgotten: list[int] = []
    ok = start_retried(argv, {"PATH": "/usr/bin:/bin"}, log, groups.append, forgotten.append)
    return ok, groups, forgotten, log


TIMEOUT = "Exception: The current node timed out during startup. This could happen because"


def test_a_start_that_timed_out_once_is_tried_again(tmp_path: Path) -> None:
    ok, groups, forgotten, log = _start(tmp_path, 1, TIMEOUT)
    assert ok
    assert len(groups) == 2 and forgotten == groups[:1]  # the failed try's group ended
    text = log.read_text()
    assert TIMEOUT in text and text.rstrip().endswith("started")  # both tries' output kept


def test_another_failure_is_not_tried_again(tmp_path: Path) -> None:
    ok, groups, forgotten, _ = _start(tmp_path, 1, "ValueError: bad --resources")
    assert not ok
    assert len(groups) == 1 and forgotten == []  # kept, for down() to end
    assert (tmp_path / "count").read_text() == "1"


def test_the_tries_are_bounded(tmp_path: Path) -> None:
    ok, groups, forgotten, _ = _start(tmp_path, 99, TIMEOUT)
    assert not ok
    assert len(groups) == START_TRIES and len(forgotten) == START_TRIES - 1


def _head_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str) -> HostCluster:
    """A host cluster whose one head command is a stand-in ``ray start`` that fails once,
    saying ``said``, then starts (its tries counted in ``tmp_path / "count"``)."""
    argv = [sys.executable, "-c", FLAKY, str(tmp_path / "count"), "1", said]
    monkeypatch.setattr(host_cluster, "bin_path", lambda name: sys.executable)
    hc = HostCluster(str(tmp_path), str(tmp_path / "none.yaml"), 1, 2, False, "ns", "disabled", 1)
    monkeypatch.setattr(hc, "_head_commands", lambda fake: [argv])
    return hc


def test_a_heads_start_that_timed_out_once_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's ``ray start`` (here a stand-in that times out once) is retried as a
    worker's is: one incarnation, in the failed try's place, saved with the group that
    started; ``lyra up`` is not run by this stand-in list of commands."""
    count = tmp_path / "count"
    hc = _head_of(tmp_path, monkeypatch, TIMEOUT)
    try:
        inc = hc.start_head()
    finally:
        hc.down()  # its temp dir under /tmp
    assert count.read_text() == "2"  # tried twice
    assert hc.heads == [inc] and inc.pgid > 0 and len(inc.commands_s) == 1
    saved = json.loads((tmp_path / "host.json").read_text())
    assert [h["pgid"] for h in saved["heads"]] == [inc.pgid]
    log = (tmp_path / "head-1" / "ray-start.log").read_text()
    assert TIMEOUT in log and log.rstrip().endswith("started")


def test_a_heads_start_that_fails_otherwise_raises_naming_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hc = _head_of(tmp_path, monkeypatch, "ValueError: bad --port")
    try:
        with pytest.raises(RuntimeError, match=r"failed; see .*head-1/ray-start\.log"):
            hc.start_head()
        assert len(hc.heads) == 1  # its group kept, for down() to end
    finally:
        hc.down()
