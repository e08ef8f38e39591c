"""The resize benchmark's breakdown (#47): a resize's recorded phases split at the
workers' own moments, the slowest worker of each generation counting."""

from __future__ import annotations

from benchmarks._resize_probe import breakdown


def test_a_resize_is_split_at_the_slowest_workers_moments() -> None:
    # decided at 100; stop seen at 100.2; the old run ended at 101.2; the new one started
    # at 101.3 and stepped at 102.3
    rec = {
        "generation": 3,
        "at": 100.0,
        "phases": {"stop_signal_s": 0.2, "checkpoint_s": 1.0, "relaunch_s": 0.1},
    }
    old = [{"generation": 2, "returned": 100.4}, {"generation": 2, "returned": 100.5}]
    new = [
        {"generation": 3, "earlier_runs": 2, "called": 101.5, "loop": 101.6,
         "restored": 101.9, "first_step": 102.2},
        {"generation": 3, "earlier_runs": 0, "called": 101.7, "loop": 101.75,
         "restored": 102.0, "first_step": 102.3},
    ]  # fmt: skip
    got = breakdown([rec], old + new)
    med = got["median_s"]
    assert med["loop_end_s"] == 0.3 and med["teardown_s"] == 0.7 and med["relaunch_s"] == 0.1
    assert med["to_call_s"] == 0.4 and med["to_loop_s"] == 0.05
    assert med["to_restored_s"] == 0.25 and med["to_step_s"] == 0.3
    assert got["new_processes_per_resize"] == [1] and got["resizes"] == 1


def test_a_resize_without_both_generations_stamped_is_left_out() -> None:
    rec = {"generation": 5, "at": 0.0,
           "phases": {"stop_signal_s": 0.1, "checkpoint_s": 0.1, "relaunch_s": 0.1}}  # fmt: skip
    assert breakdown([rec], [{"generation": 4, "returned": 1.0}])["resizes"] == 0
    assert breakdown([{**rec, "phases": {"checkpoint_s": 1.0}}], [])["resizes"] == 0
