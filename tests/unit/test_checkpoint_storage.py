"""Checkpoint discovery through pyarrow.fs: a local path and a URI find the same newest
checkpoint, named as they were asked (lyra_ray.train.storage)."""

from __future__ import annotations

import json
from pathlib import Path

from lyra_ray.train.storage import STATE_FILE, join, newest_checkpoint, read_step


def _ckpt(root: Path, name: str, step: int | None, job: str = "j") -> None:
    d = root / name
    d.mkdir(parents=True)
    if step is not None:
        (d / STATE_FILE).write_text(json.dumps({"step": step, "job_id": job}))


def test_the_newest_checkpoint_by_path_and_by_uri(tmp_path: Path) -> None:
    run = tmp_path / "lyra-job-1"
    _ckpt(run, "step_000000020", 20)
    _ckpt(run, "step_000000120", 120)
    _ckpt(run, "step_000000100", 100)
    _ckpt(run, "not-ours", None)  # a directory without our state file
    (run / "stray.txt").write_text("x")
    (run / "broken").mkdir()
    (run / "broken" / STATE_FILE).write_text("{not json")
    assert newest_checkpoint(run) == (str(run / "step_000000120"), 120)
    uri = f"file://{run}"
    assert newest_checkpoint(uri) == (f"{uri}/step_000000120", 120)
    assert read_step(f"{uri}/step_000000100") == 100
    assert read_step(run / "broken") is None and read_step(run / "not-ours") is None


def test_no_run_directory_yet(tmp_path: Path) -> None:
    assert newest_checkpoint(tmp_path / "missing") is None
    assert newest_checkpoint(f"file://{tmp_path}/missing") is None
    assert join("s3://bucket/lyra/", "lyra-j") == "s3://bucket/lyra/lyra-j"
    assert join("/mnt/shared", "lyra-j") == "/mnt/shared/lyra-j"
