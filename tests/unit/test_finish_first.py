"""Lyra's ``finish_first``: a queued job starts on a slower type only if it finishes
there no later than by waiting for its fastest type (policies/lyra/finish_first.py)."""

from __future__ import annotations

import math
import random

import pytest

from lyra_ray.model import Assignment, ClusterSnapshot, JobSpec, JobStatus, JobView, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.lyra.finish_first import Timeline
from lyra_ray.policies.lyra.two_phase import LyraPolicy

NODES = (Node("a0", "a100", 4), Node("t0", "t4", 4, "inference"))
SPEED = {"a100": 3.0, "t4": 1.0}  # steps/s per worker: a T4 a third of an A100


def _busy(remaining_steps: float) -> JobView:
    """A rigid 4-worker job holding all four A100s, ending in ``steps / 12`` seconds."""
    spec = JobSpec("busy", 10**9, 4, 4, throughput={"a100": 3.0})
    return JobView("busy", spec, 0.0, JobStatus.RUNNING, 10**9 - remaining_steps, 0.0, {}, {},
                   Assignment("a100", 4, (("a0", 4),)))  # fmt: skip


def _queued(
    name: str, steps: float, lo: int = 4, hi: int = 4, speed: dict[str, float] | None = None
) -> JobView:
    spec = JobSpec(name, steps, lo, hi, throughput=speed or SPEED)
    return JobView(name, spec, 0.0, JobStatus.QUEUED, 0.0, 0.0, {}, {}, None)


def _decide(policy: LyraPolicy, *jobs: JobView) -> tuple[dict[str, str], dict[str, str]]:
    """One decision with the T4 server lent: where each job runs, and why others wait."""
    snap = ClusterSnapshot(0.0, NODES, jobs, SpecThroughputs(), serving_demand=0,
                           lent_nodes=frozenset({"t0"}))  # fmt: skip
    alloc = policy.allocate(snap)
    where = {j: t for j, (t, _) in alloc.workers.items()}
    return where, {j: f"{code}: {text}" for j, (code, text) in alloc.waiting.items()}


def test_the_timeline_finds_the_first_start_that_holds_for_the_whole_run() -> None:
    line = Timeline(free_now=1)
    line.release(100.0, 2)  # 3 free from 100 s
    line.release(300.0, 1)  # 4 free from 300 s
    assert line.earliest(1, 50.0) == 0.0
    assert line.earliest(3, 50.0) == 100.0
    line.book(100.0, 3, 500.0)  # a job ahead takes 3 from 100 s to 600 s
    # free: 1 until 100 s, 0 until 300 s, 1 until 600 s, then 4
    assert line.earliest(1, 10.0) == 0.0
    assert line.earliest(1, 200.0) == 300.0  # the gap before 100 s is too short
    assert line.earliest(2, 10.0) == 600.0
    assert line.earliest(5, 1.0) == math.inf  # more than the type ever has


def test_the_one_pass_search_agrees_with_checking_every_start() -> None:
    rnd = random.Random(7)
    for _ in range(300):
        line = Timeline(free_now=rnd.randint(0, 4))
        for _ in range(rnd.randint(0, 6)):
            line.release(float(rnd.randint(0, 20)), rnd.randint(1, 3))
        for _ in range(rnd.randint(0, 3)):
            line.book(float(rnd.randint(0, 20)), rnd.randint(1, 3), float(rnd.randint(1, 10)))
        gpus, run = rnd.randint(1, 6), float(rnd.randint(1, 12))

        def low(a: float, b: float, line: Timeline = line) -> int:
            level = line.free_now + sum(d for t, d in line.changes if t <= a)
            inside = [t for t, _ in line.changes if a < t < b]
            at = [line.free_now + sum(d for t, d in line.changes if t <= x) for x in inside]
            return min([level, *at])

        starts = [0.0, *sorted({t for t, _ in line.changes})]
        want = next((x for x in starts if low(x, x + run) >= gpus), math.inf)
        assert line.earliest(gpus, run) == want, (line, gpus, run)


def test_a_booking_ends_and_gives_its_gpus_back() -> None:
    line = Timeline(free_now=4)
    line.book(0.0, 4, 200.0)
    assert line.earliest(2, 50.0) == 200.0
    line.release(math.inf, 4)  # a job that never ends frees nothing
    assert line.earliest(8, 1.0) == math.inf


def test_a_long_rigid_job_waits_for_the_fast_type_when_it_finishes_sooner() -> None:
    # The A100s free in 100 s; on them the job runs 12,000 / 12 = 1,000 s, on the free
    # T4s 12,000 / 4 = 3,000 s: it finishes at 1,100 s by waiting, at 3,000 s by not.
    where, why = _decide(LyraPolicy(finish_first="rigid"), _busy(1200), _queued("long", 12_000))
    assert "long" not in where
    code, text = why["long"].split(": ", 1)
    assert code == "faster_type" and "a100" in text and "t4" in text, why


def test_a_short_job_starts_on_the_slow_type_it_finishes_first_on() -> None:
    # 240 steps: 20 s on the A100s after a 100 s wait, 60 s on the T4s now.
    where, why = _decide(LyraPolicy(finish_first="rigid"), _busy(1200), _queued("short", 240))
    assert where["short"] == "t4" and not why


def test_jobs_ahead_that_wait_are_booked_so_the_next_one_sees_a_longer_wait() -> None:
    # "a" (shortest, first) books the A100s from 100 s to 1,100 s; "b" (1,200 s on
    # them, 3,600 s on the T4s) waits too, booked from 1,100 s to 2,300 s. "c" runs
    # nearly as fast on T4s (2,880 s) as on A100s (2,400 s): alone it would wait (done
    # at 2,500 s), but behind "a" and "b" it would be done at 4,700 s: it starts now.
    near = {"a100": 3.0, "t4": 2.5}
    policy = LyraPolicy(finish_first="rigid", loan_max_remaining_s=None)
    c = _queued("c", 28_800, speed=near)
    assert "c" not in _decide(policy, _busy(1200), c)[0]
    where, why = _decide(policy, _busy(1200), _queued("a", 12_000), _queued("b", 14_400), c)
    assert where == {"busy": "a100", "c": "t4"}, (where, why)
    assert why["a"].startswith("faster_type") and why["b"].startswith("faster_type")
    assert "about 18 min" in why["b"]  # it starts when "a" ends: 1,100 s


def test_off_by_default_and_for_elastic_jobs_under_rigid() -> None:
    assert _decide(LyraPolicy(), _busy(1200), _queued("long", 12_000))[0]["long"] == "t4"
    elastic = _queued("long", 12_000, lo=4, hi=8)
    assert _decide(LyraPolicy(finish_first="rigid"), _busy(1200), elastic)[0]["long"] == "t4"
    where, why = _decide(LyraPolicy(finish_first="all"), _busy(1200), elastic)
    assert "long" not in where and why["long"].startswith("faster_type")


def test_a_running_job_is_never_sent_back_to_wait() -> None:
    spec = JobSpec("on_t4", 12_000, 4, 4, throughput=SPEED)
    running = JobView("on_t4", spec, 0.0, JobStatus.RUNNING, 0.0, 0.0, {}, {},
                      Assignment("t4", 4, (("t0", 4),)))  # fmt: skip
    where, _ = _decide(LyraPolicy(finish_first="all", move_gain_s=None), _busy(1200), running)
    assert where["on_t4"] == "t4"


@pytest.mark.parametrize("bad", ["yes", True, 1])
def test_an_unknown_setting_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match="finish_first"):
        LyraPolicy(finish_first=bad)  # type: ignore[arg-type]


def test_the_projection_books_a_bounded_number_of_waiting_jobs() -> None:
    from lyra_ray.policies.lyra.finish_first import MAX_BOOKED

    line = Timeline(free_now=0)
    line.release(10.0, 1)
    assert all(line.book(10.0 + k, 1, 1.0) for k in range(MAX_BOOKED))
    assert not line.book(1e6, 1, 1.0)  # past the bound: nothing booked
    assert line.booked == MAX_BOOKED
    assert line.earliest(1, 1.0) == 10.0 + MAX_BOOKED  # when the last booking ends
    line.occupy(1, 100.0)  # a job placed now is a fact, taken whatever the bound
    assert line.earliest(1, 1.0) == 100.0
