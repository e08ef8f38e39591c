"""docs/lyra.md's jittered replays (``benchmarks/_lyra_jitter.py``): the verdict per copy
is the issue's (a 1 % tie counts), and the sentences name the runs the JSON says."""

from __future__ import annotations

from typing import Any

from benchmarks import _lyra_jitter as J


def _c(queue: float, jct: float = 1.05, pre: float = 0.0) -> dict[str, float]:
    return {"queue": queue, "jct": jct, "preempted": pre}


def _doc() -> dict[str, Any]:
    return {
        "jitter": {
            "jitter_s": 60.0,
            "copies": 4,
            "runs": {
                # missed as evaluated, met on most copies: where its arrivals fell
                "workload-7/1": {"as_evaluated": _c(0.97), "copies": [_c(1.03)] * 3 + [_c(0.9)]},
                # missed as evaluated and on most copies: the policy queues more there
                "workload-3/0": {"as_evaluated": _c(0.94), "copies": [_c(0.95)] * 3 + [_c(1.1)]},
                "workload-1/0": {"as_evaluated": _c(1.1), "copies": [_c(1.1)] * 4},
            },
        }
    }


def test_the_goals_count_a_one_percent_tie_and_cap_preemptions() -> None:
    assert J.met(_c(1 / 1.01)) and not J.met(_c(0.98))
    assert not J.met(_c(1.2, jct=0.98)) and not J.met(_c(1.2, pre=0.051))


def test_the_sentences_name_each_miss_and_what_its_copies_say() -> None:
    text = J.jitter_prose(_doc())
    assert "meets all three goals on 1 of 3 runs" in text
    assert "on a majority of each run's jittered copies, on 2 of 3; over all 12" in text
    assert "copies, on 8." in text
    assert "workload-7/1 (missed as evaluated): met on 3 of 4 copies" in text
    assert "workload-3/0 (missed as evaluated): met on 1 of 4 copies" in text
    assert text.endswith("beyond the tie: workload-3/0.")


def test_the_table_has_a_row_per_run_and_says_when_nothing_ran() -> None:
    table = J.jitter_table(_doc())
    assert "| workload-7/1 | 0.970 | **no** | 1.030 [0.900 – 1.030] | 3 of 4 |" in table
    assert table.count("| workload-") == 3
    assert J.jitter_table({}) == "(no jitter runs)" == J.jitter_prose({})
