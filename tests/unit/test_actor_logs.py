"""A failed live test's report finds the scheduler's log by Ray's actor mark."""

from __future__ import annotations

import os
from pathlib import Path

from tests.actor_logs import actor_log_tails


def _write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_tails_of_the_actors_files_only_newest_last(tmp_path: Path) -> None:
    body = "\n".join(f"line {i}" for i in range(100))
    _write(
        tmp_path / "worker-a.err", f":actor_name:GlobalScheduler\n:job_id:01000000\n{body}\n", 200.0
    )
    _write(tmp_path / "worker-b.err", ":actor_name:GlobalScheduler\nold crash\n", 100.0)
    _write(tmp_path / "worker-c.err", ":actor_name:GangWorker\nnot ours\n", 300.0)
    _write(tmp_path / "worker-d.out", ":actor_name:GlobalScheduler\nstdout\n", 300.0)
    tail = actor_log_tails(tmp_path, "GlobalScheduler", lines=5)
    assert tail.index("worker-b.err") < tail.index("worker-a.err")  # newest last
    assert "old crash" in tail and "line 99" in tail and "line 94" not in tail
    assert (
        "not ours" not in tail
        and "stdout" not in tail
        and ":actor_name:" not in tail
        and ":job_id:" not in tail
    )


def test_a_class_name_that_only_prefixes_another_is_not_matched(tmp_path: Path) -> None:
    _write(tmp_path / "worker-a.err", ":actor_name:GlobalSchedulerProxy\nx\n", 1.0)
    assert actor_log_tails(tmp_path, "GlobalScheduler") == ""
    assert actor_log_tails(tmp_path / "missing", "GlobalScheduler") == ""
