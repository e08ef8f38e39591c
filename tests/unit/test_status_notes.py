"""`lyra status` says, per job still to run, which GPU types of its throughput table
the cluster lacks (#22): they are ignored, and a user should see that where they look."""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray.cli.live import _print_ignored


def _view(*jobs: dict[str, Any]) -> dict[str, Any]:
    nodes = [{"gpu_type": "V100"}, {"gpu_type": "k80"}]
    return {"nodes": nodes, "jobs": list(jobs)}


def test_a_queued_job_naming_an_absent_type_gets_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    _print_ignored(
        _view(
            {"id": "tiny-a-0001", "status": "queued", "throughput": {"v100": 1, "P100": 1}},
            {"id": "ok-0002", "status": "running", "throughput": {"k80": 1.0}},
            {"id": "typed-0003", "status": "queued", "throughput": None},
        )
    )
    out = capsys.readouterr().out.splitlines()
    assert out == ["  note: tiny-a-0001 names GPU types this cluster lacks, ignored: ['p100']"]


def test_ended_jobs_get_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    _print_ignored(_view({"id": "x", "status": "finished", "throughput": {"a100": 1.0}}))
    assert capsys.readouterr().out == ""
