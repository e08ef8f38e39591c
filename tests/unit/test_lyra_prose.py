"""docs/lyra.md's rendered sentences count and name what the results hold
(``benchmarks/_lyra_prose.py``): a rerun that changes which runs meet the goals changes
the sentences, so the counts can no longer go stale the way typed ones did."""

from __future__ import annotations

from typing import Any

from benchmarks import _lyra_prose as P


def _sc(queue: float, jct: float, pre: float = 0.0, run: float = 100.0) -> dict[str, Any]:
    return {
        "avg_queue_s": queue,
        "avg_jct_s": jct,
        "preemption_ratio": pre,
        "mean_run_s": run,
        "on_loan_utilisation": 0.5,
        "on_loan_utilisation_while_queued": 0.75,
    }


def _report() -> dict[str, Any]:
    base = _sc(1000.0, 3000.0)
    return {
        "settings": {"restart_s": 8.3},
        "runs": {
            # meets all three, 1.5x on JCT
            "workload-1/0": {
                "held_out": False,
                "scenarios": {
                    "baseline": base,
                    "basic": _sc(500.0, 2200.0, 0.01),
                    "lyra": _sc(400.0, 2000.0, 0.02),
                    "ideal": _sc(350.0, 1900.0),
                },
            },
            # queues 20 % longer than Basic: misses; 0.5 % longer on JCT is a tie
            "workload-2/0": {
                "held_out": True,
                "scenarios": {
                    "baseline": base,
                    "basic": _sc(500.0, 2000.0, 0.0),
                    "lyra": _sc(600.0, 2010.0, 0.06),
                    "ideal": _sc(550.0, 1990.0),
                },
            },
        },
    }


def test_pollux_goals_counts_and_names_the_misses() -> None:
    text = P.pollux_goals(_report())
    assert "all three met on 1 of 2 runs" in text
    assert "8.3 s for a job that states nothing" in text
    miss = text.split("Missed on: ", 1)[1].split("\n", 1)[0]
    assert miss.startswith("workload-2/0: Lyra queues 20.0 % longer than Basic (600 s")
    assert "it preempts 6.0 % of jobs" in miss
    assert "Ideal (free restarts) queues 550 s" in miss
    assert "workload-1/0" not in miss
    assert "below Basic's on 1 of 2 runs" in text
    # workload-1 reaches 1.5x on its one seed, workload-2 (1.49x) does not
    assert "on every seed of 1 of the 2 workloads** (1: 1.50×)" in text
    assert "**workload-2: 1.49×**" in text


def test_held_out_splits_the_runs_by_who_chose_the_defaults() -> None:
    text = P.held_out(_report())
    assert text == (
        "On the 1 held-out workloads Lyra meets all three goals on 0 of 1 runs "
        "(missed on workload-2/0); on the workloads that chose the defaults, on 1 of 1 runs."
    )


def _tally(all_: int, queue: int, pre: int, qg: float, mp: float) -> dict[str, Any]:
    return {
        "runs": 24,
        "all": all_,
        "queue": queue,
        "jct": 24,
        "preempted": pre,
        "queue_geo": qg,
        "jct_geo": 0.9,
        "max_preempted": mp,
    }


def test_ablation_lists_only_what_a_part_changes_and_each_parts_price() -> None:
    doc = {
        "labels": {"lyra": "Lyra (defaults)", "a": "part a", "b": "part b"},
        "order": ["lyra", "a", "b"],
        "pollux": {
            "lyra": _tally(20, 20, 24, 0.9, 0.05),
            "a": _tally(15, 15, 24, 0.95, 0.05),
            "b": _tally(20, 20, 24, 0.9, 0.05),
        },
        "restart_s": {"pollux": 8.3, "sensitivity": 8.3, "noise": 8.3},
    }
    text = P.ablation(doc)
    assert "pollux 8.3 s" in text and "philly not recorded" in text
    assert (
        "* **part a**: Pollux: all three goals met on 15 of 24 (20), "
        "queuing goal on 15 of 24 (20), queuing vs Basic 0.950 (0.900)." in text
    )
    assert "* **part b**: Pollux: the defaults' figures." in text


def test_sensitivity_reports_preemptions_past_five_percent_and_longer_queues() -> None:
    doc = {
        "sensitivity": {
            "default": _tally(16, 16, 22, 0.95, 0.069),
            "48 A100": _tally(11, 11, 24, 1.057, 0.025),
        }
    }
    text = P.sensitivity(doc)
    assert "all three goals on 11–16 of 24 runs per regime" in text
    assert "passes 5 % on 2 runs of regime “default” (at most 6.9 %)" in text
    assert "regime “48 A100” (5.7 % longer, JCT 10.0 % shorter)" in text


def test_the_sensitivity_table_sets_each_alternative_under_its_regime() -> None:
    """What ``--sensitivity`` ran beside the defaults is a row of its own, so a setting
    that wins on one pool and loses on another shows both (the 1-h loan rule did)."""
    from benchmarks._lyra_report import sensitivity_table

    pool = {"cluster": "a100=4x8", "inference": "t4=8x4", "serving": ["m@160"], "seeds": [3]}
    alt = {"label": "a 1-h loan rule", "args": {"loan_max_remaining_s": 3600.0}}
    regime = {**pool, **_tally(12, 14, 24, 1.009, 0.044)}
    regime["alternatives"] = {"loan_1h": {**alt, **_tally(16, 16, 24, 0.949, 0.044)}}
    rows = sensitivity_table({"sensitivity": {"default": regime}}).splitlines()[2:]
    assert rows[0].startswith("| default | a100=4x8 / t4=8x4 | 160 | 3 | 12/24 |")
    assert rows[1].startswith("| default, with a 1-h loan rule | a100=4x8 / t4=8x4 | 160 | 3 |")
    assert "| 16/24 | 16 / 24 / 24 | 0.949, 0.900 |" in rows[1]
