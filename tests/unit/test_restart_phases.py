"""A resize's phases from the runtime's and the control actor's timestamps (#29, item 3)."""

from __future__ import annotations

from lyra_ray.runtime.restart_phases import KEEP, RestartPhases


def test_a_resize_is_split_into_its_phases_once_the_new_run_steps() -> None:
    p = RestartPhases()
    p.requested("j", 1, 2, now=100.0)
    p.stopped("j", {"stop_seen": 100.4, "finished_at": 101.9}, resize=True, now=102.5)
    p.relaunched("j", 2, 4, now=103.0)
    p.observe("j", 2, {"workers_up": 110.0})  # up, not stepping yet: still open
    assert p.take_fresh() == [] and "j" in p.open
    p.observe("j", 1, {"workers_up": 110.0, "first_step": 111.0})  # the old generation
    p.observe("j", 2, {"workers_up": 110.0, "first_step": 112.5})
    (r,) = p.take_fresh()
    assert r["kind"] == "resize" and (r["from_workers"], r["to_workers"]) == (2, 4)
    assert r["phases"] == {
        "stop_signal_s": 0.4,
        "checkpoint_s": 1.5,
        "relaunch_s": 1.1,
        "workers_up_s": 7.0,
        "first_step_s": 2.5,
    }
    assert r["total_s"] == 12.5 == sum(r["phases"].values())
    assert p.last("j") == r and p.take_fresh() == []


def test_a_preemption_has_its_stop_phases_only() -> None:
    p = RestartPhases()
    p.requested("j", 3, 1, now=10.0)
    p.stopped("j", {"stop_seen": 10.5, "finished_at": 12.0}, resize=False, now=12.2)
    (r,) = p.take_fresh()
    assert r["kind"] == "preempt" and r["phases"] == {"stop_signal_s": 0.5, "checkpoint_s": 1.5}
    assert r["total_s"] == 2.0


def test_a_run_killed_past_its_grace_counts_from_the_request() -> None:
    p = RestartPhases()
    p.requested("j", 1, 1, now=0.0)
    p.stopped("j", None, resize=False, now=30.0)  # no control record: killed
    (r,) = p.take_fresh()
    assert r["phases"] == {"checkpoint_s": 30.0}


def test_records_survive_a_restart_and_stay_bounded() -> None:
    p = RestartPhases()
    for i in range(KEEP + 5):
        p.requested(f"j{i}", 1, 1, now=float(i))
        p.stopped(f"j{i}", {"stop_seen": i + 0.1, "finished_at": i + 0.2}, False, now=i + 0.3)
    p.requested("open", 1, 2, now=1.0)
    q = RestartPhases()
    q.load_state(p.to_state())
    assert len(q.done) == KEEP and q.done[-1]["job_id"] == f"j{KEEP + 4}"
    assert "open" in q.open


def test_a_restart_asked_again_before_its_run_stepped_is_kept_as_interrupted() -> None:
    p = RestartPhases()
    p.requested("j", 1, 4, now=0.0)
    p.stopped("j", {"stop_seen": 0.5, "finished_at": 1.0}, resize=True, now=1.2)
    p.relaunched("j", 2, 2, now=1.5)
    p.requested("j", 2, 2, now=9.0)  # grown again before generation 2 stepped
    (r,) = p.take_fresh()
    assert r["interrupted"] and r["phases"]["relaunch_s"] == 0.5
    assert "first_step_s" not in r["phases"] and p.open["j"]["from_generation"] == 2
