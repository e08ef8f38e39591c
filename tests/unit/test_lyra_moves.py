"""A running job moves to faster GPUs that the queue left free (policies/lyra/moves.py)."""

from __future__ import annotations

from dataclasses import replace

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
    # 80,000 steps: 20,000 s on four T4s, 6,667 s on four A100s: a gain past two hours
    slow = job("slow", 80_000.0, on="t4")
    assert LyraPolicy().allocate(snap(slow)).workers["slow"] == ("a100", 4)
    assert LyraPolicy(move_gain_s=None).allocate(snap(slow)).workers["slow"] == ("t4", 4)
    short = job("short", 8_000.0, on="t4")  # 1,333 s to gain: not worth a move
    assert LyraPolicy().allocate(snap(short)).workers["short"] == ("t4", 4)


def test_a_move_never_takes_gpus_a_queued_job_can_start_on() -> None:
    slow, waiting = job("slow", 80_000.0, on="t4"), job("new", 100.0)
    alloc = LyraPolicy().allocate(snap(slow, waiting))
    assert alloc.workers["new"] == ("a100", 4)
    assert alloc.workers["slow"] == ("t4", 4)


def test_a_move_its_teams_bounds_refuse_does_not_happen() -> None:
    # Under the teams wrapper a move books the new type and gives the old one back; a
    # team that may hold only four GPUs (its T4s) borrows no A100s to move onto.
    from lyra_ray.model.team_bounds import Limit, TeamBounds

    slow = job("slow", 80_000.0, on="t4")

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


def _gather_case(hog_remaining: float) -> ClusterSnapshot:
    """Eight A100s: four held by ``hog`` (ends after ``hog_remaining`` / 12 s), four
    free; ``big`` (eight workers) waits to gather all eight; ``slow`` runs on T4s and
    would gain hours on the four free A100s."""
    nodes = (Node("a1", "a100", 4), Node("a2", "a100", 4), Node("t", "t4", 4, "inference"))
    hog = job("hog", hog_remaining)
    hog = replace(
        hog,
        status=JobStatus.RUNNING,
        current=Assignment("a100", 4, (("a1", 4),)),
    )
    big_spec = JobSpec("big", 10_000.0, 8, 8, throughput=SPEED)
    big = replace(job("big", 10_000.0), spec=big_spec)
    slow = job("slow", 80_000.0, on="t4")
    return ClusterSnapshot(
        0.0, nodes, (hog, big, slow), SpecThroughputs(), serving_demand=0,
        lent_nodes=frozenset({"t"}),
    )  # fmt: skip


def test_a_move_may_hold_back_the_job_gathering_a_type_only_if_asked() -> None:
    # ``hog`` ends in 100 s, when ``big`` could have all eight A100s; ``slow`` moved onto
    # the four free ones would keep them ~6,700 s. By default it moves (more jobs finish
    # sooner on the evaluation's runs); with ``move_holds_back`` it stays where it is.
    case = _gather_case(1_200.0)
    assert LyraPolicy().allocate(case).workers["slow"] == ("a100", 4)
    held = LyraPolicy(move_holds_back=True).allocate(case)
    assert held.workers["slow"] == ("t4", 4)
    assert "big" not in held.workers  # it still waits for the hog's four


def test_a_move_that_ends_before_the_waiting_job_could_start_still_happens() -> None:
    # ``hog`` runs ~83,000 s more: ``slow`` is done on the A100s well before ``big``
    # could gather eight, so moving it delays nobody.
    case = _gather_case(1_000_000.0)
    assert LyraPolicy(move_holds_back=True).allocate(case).workers["slow"] == ("a100", 4)


def test_reservations_name_the_shadow_time_and_what_is_spare_then() -> None:
    from lyra_ray.policies.lyra.moves import reservations

    case = _gather_case(1_200.0)
    by_id = {j.id: j for j in case.jobs}
    chosen = {"hog": ("a100", 4, 4), "slow": ("t4", 4, 4)}
    got = reservations(case, chosen, {"a100": 4, "t4": 0}, [(by_id["big"], 8)])
    assert got == {"a100": [100.0, 0.0]}  # hog: 1,200 steps at 12/s
    # a waiting job that needs more than the type has never gathers it: no reservation
    huge = replace(by_id["big"], spec=JobSpec("huge", 1.0, 16, 16, throughput=SPEED))
    assert reservations(case, chosen, {"a100": 4, "t4": 0}, [(huge, 16)]) == {}
