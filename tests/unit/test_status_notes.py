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


def test_a_space_sharing_pair_is_shown_as_shared_and_named_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lyra_ray.cli.live import _fmt_assign, _print_pairs, job_row

    a = {"gpu_type": "v100", "workers": 1, "nodes": [["n1", 1]], "partner": "b-0002"}
    b = {**a, "partner": "a-0001"}
    rows = [
        {"id": "a-0001", "status": "running", "assignment": a},
        {"id": "b-0002", "status": "running", "assignment": b},
        {"id": "c-0003", "status": "running", "assignment": {**a, "partner": None}},
        {"id": "d-0004", "status": "queued", "assignment": None},
    ]
    assert [_fmt_assign(r["assignment"]) for r in rows] == [
        "v100 x 1 shared",
        "v100 x 1 shared",
        "v100 x 1",
        "-",
    ]
    _print_pairs(rows)
    assert capsys.readouterr().out.splitlines() == [
        "  a-0001 and b-0002 share their GPUs (space sharing)"
    ]
    assert job_row(rows[0])["partner"] == "b-0002" and job_row(rows[3])["partner"] is None
