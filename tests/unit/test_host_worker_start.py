"""A host cluster's node start (``node_start.start_retried``): tried again after the
transient failures Ray reports under load, not after any other, its failed tries'
process groups forgotten and the log kept whole."""

from __future__ import annotations

import sys
from pathlib import Path

from lyra_ray.ops.embedded import START_TRIES
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
