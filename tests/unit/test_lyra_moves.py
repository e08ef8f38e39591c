"""A running job moves to faster GPUs that the queue left free (policies/lyra/moves.py)."""

from __future__ import annotations

from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.lyra.two_phase import LyraPolicy

NODES = (Node("a", "a100", 4), Node("t", "t4", 4, "inference"))
SPEED = {"a100": 3.0, "t4": 1.0}


def job(name: str, remaining: float, on: str | None = None) -> JobView:
    s = JobSpec(name, remaining, 4, 4, throughput=SPEED)
    cur = Assignment(on, 4, (("a" if on == "a100" else "t", 4),)) if on else None
    return JobView(
        id=name, spec=s, arrival_s=0.0,
        status=JobStatus.RUNNING if on else JobStatus.QUEUED,
        steps_done=0.0, attained_service_s=0.0, time_received_s={},
        throughput={"a100": 12.0, "t4": 4.0}, current=cur,
    )  # fmt: skip


def snap(*jobs: JobView) -> ClusterSnapshot:
    return ClusterSnapshot(
        0.0, NODES, jobs, SpecThroughputs(), serving_demand=0, lent_nodes=frozenset({"t"})
    )


def test_a_long_job_on_slow_gpus_moves_where_faster_ones_idle() -> None:
    # 40,000 steps: 10,000 s on four T4s, 3,333 s on four A100s: a gain past an hour
    slow = job("slow", 40_000.0, on="t4")
    assert LyraPolicy().allocate(snap(slow)).workers["slow"] == ("a100", 4)
    assert LyraPolicy(move_gain_s=None).allocate(snap(slow)).workers["slow"] == ("t4", 4)
    short = job("short", 4_000.0, on="t4")  # 667 s to gain: not worth a move
    assert LyraPolicy().allocate(snap(short)).workers["short"] == ("t4", 4)


def test_a_move_never_takes_gpus_a_queued_job_can_start_on() -> None:
    slow, waiting = job("slow", 40_000.0, on="t4"), job("new", 100.0)
    alloc = LyraPolicy().allocate(snap(slow, waiting))
    assert alloc.workers["new"] == ("a100", 4)
    assert alloc.workers["slow"] == ("t4", 4)


def test_a_move_its_teams_bounds_refuse_does_not_happen() -> None:
    # Under the teams wrapper a move books the new type and gives the old one back; a
    # team that may hold only four GPUs (its T4s) borrows no A100s to move onto.
    from dataclasses import replace

    from lyra_ray.model.team_bounds import Limit, TeamBounds

    slow = job("slow", 40_000.0, on="t4")

    def bounds(borrow: float) -> TeamBounds:
        return TeamBounds(
            team_of={"slow": "x"},
            capacity={"a100": 4.0, "t4": 4.0},
            reserved={},
            limits={"x": Limit({"t4": 4.0}, borrow)},
            strict=True,
        )

    tight = replace(snap(slow), team_bounds=bounds(0.0))
    assert LyraPolicy().allocate(tight).workers["slow"] == ("t4", 4)
    room = replace(snap(slow), team_bounds=bounds(4.0))
    assert LyraPolicy().allocate(room).workers["slow"] == ("a100", 4)
