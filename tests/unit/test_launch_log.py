"""The runtime's audit trail (lyra_ray/runtime/launch_log.py): generation numbers are
never reused, a stop's gap closes at the next launch, an archived job hands over its
launches, and a restart resumes all of it from the same state keys as before."""

from __future__ import annotations

import json

from lyra_ray.runtime.launch_log import GAPS_KEPT, LaunchLog

A = {"gpu_type": "k80", "workers": 1, "nodes": [["n1", 1]], "partner": None}


def test_generations_count_up_and_a_gap_closes_at_the_next_launch() -> None:
    log = LaunchLog()
    assert log.generation("j") == 0
    g1 = log.next_generation("j")
    log.launched(10.0, "j", g1, A)
    log.stop_requested("j", 20.0)
    g2 = log.next_generation("j")
    log.launched(23.5, "j", g2, A)
    assert (g1, g2, log.generation("j")) == (1, 2, 2)
    assert log.gaps == [{"job_id": "j", "generation": 2, "gap_s": 3.5}]
    assert log.stop_requested_at == {}
    assert [(t, j, g) for t, j, g, _ in log.launches] == [(10.0, "j", 1), (23.5, "j", 2)]


def test_an_adopted_run_takes_its_number_and_the_next_start_goes_past_it() -> None:
    log = LaunchLog()
    log.take("j", 3)
    log.adopted(5.0, "j", 3, A)
    assert log.next_generation("j") == 4
    assert log.gaps == []  # the stop before it was asked by the scheduler that died


def test_forget_hands_over_a_jobs_launches_and_keeps_the_others() -> None:
    log = LaunchLog()
    for job in ("a", "b"):
        log.launched(1.0, job, log.next_generation(job), A)
    log.stop_requested("a", 2.0)
    mine = log.forget("a")
    assert [j for _, j, _, _ in mine] == ["a"]
    assert [j for _, j, _, _ in log.launches] == ["b"]
    assert log.generation("a") == 0 and "a" not in log.stop_requested_at


def test_a_restart_resumes_it_from_the_saved_state() -> None:
    log = LaunchLog()
    log.launched(1.0, "j", log.next_generation("j"), A)
    log.stop_requested("j", 2.0)
    for i in range(GAPS_KEPT + 5):
        log.gaps.append({"job_id": "x", "generation": i, "gap_s": 1.0})
    state = json.loads(json.dumps(log.to_state()))  # as the store keeps it
    assert set(state) == {"generations", "launches", "gaps", "stop_requested_at"}
    assert len(state["gaps"]) == GAPS_KEPT and state["gaps"][-1]["generation"] == GAPS_KEPT + 4
    back = LaunchLog()
    back.load_state(state)
    assert back.launches == log.launches
    assert back.generation("j") == 1 and back.stop_requested_at == {"j": 2.0}
    assert back.next_generation("j") == 2
