"""The profiler's pure parts (#28): when a measurement is done, which measurements a
profile takes, and the file a cut-short profile still writes."""

from __future__ import annotations

import json
from pathlib import Path

from lyra_ray.model.throughput import load_gavel_throughputs
from lyra_ray.profiling.meter import Meter, MeterSettings
from lyra_ray.profiling.plan import (
    Measurement,
    ProfiledJob,
    choose_pairs,
    plan,
    table,
    worker_counts,
)


def test_the_meter_discards_the_warm_up_and_stops_when_two_windows_agree() -> None:
    m = Meter(MeterSettings(warmup_s=1.0, window_s=1.0, tolerance=0.05, max_windows=5))
    t, steps = 0.0, 0
    for rate in [1, 1, 10, 10, 10, 10]:  # a cold first second, then 10 steps/s
        for _ in range(rate):
            steps += 1
            t += 1.0 / rate
            m.tick(t, steps)
        if m.done:
            break
    r = m.result()
    assert r["converged"] and abs(r["rate"] - 10.0) < 0.6, r
    assert all(w > 5 for w in r["windows"])  # the cold second counted in no window


def test_the_meter_gives_up_after_max_windows_and_reports_its_spread() -> None:
    m = Meter(MeterSettings(warmup_s=0.0, window_s=1.0, tolerance=0.01, max_windows=3))
    t, steps = 0.0, 0
    for rate in [5, 10, 5, 10, 5]:  # never two alike
        for _ in range(rate):
            steps += 1
            t += 1.0 / rate
            m.tick(t, steps)
    r = m.result()
    assert m.done and not r["converged"] and len(r["windows"]) == 3
    assert r["spread"] > 0.05  # the windows disagree, and the file says by how much


def test_pairs_per_job_spreads_partners_evenly_and_all_means_all() -> None:
    keys = ["a", "b", "c", "d", "e"]
    assert len(choose_pairs(keys, None)) == 15  # 10 pairs + 5 self-pairs
    some = choose_pairs(keys, 2)
    counts = {k: sum(k in p for p in some) for k in keys}
    assert all(c >= 2 for c in counts.values()) and len(some) < 15


def test_worker_counts_cover_both_ends_and_the_powers_of_two_between() -> None:
    assert worker_counts(1, 8, 16) == (1, 2, 4, 8)
    assert worker_counts(3, 12, 16) == (3, 4, 8, 12)
    assert worker_counts(2, 8, 4) == (2, 4)


def test_pairs_only_between_jobs_of_one_runtime_env() -> None:
    jobs = [
        ProfiledJob("a", {}, (1,)),
        ProfiledJob("b", {}, (1, 2)),
        ProfiledJob("c", {}, (1,), runtime_env={"working_dir": "x"}),
    ]
    todo = plan(jobs, {"v100": 2, "k80": 1}, None)
    pairs = {m.jobs for m in todo if len(m.jobs) == 2}
    assert pairs == {("a", "a"), ("a", "b"), ("b", "b"), ("c", "c")}
    assert Measurement("v100", ("b",), 2) in todo and Measurement("k80", ("b",), 2) not in todo


def test_a_cut_short_profile_writes_what_it_measured_and_lists_the_rest(tmp_path: Path) -> None:
    todo = plan([ProfiledJob("a", {}), ProfiledJob("b", {})], {"v100": 1}, None)
    ok = {"rate": 4.0, "spread": 0.01, "converged": True}
    results = {
        "v100|alone|a|1": [ok],
        "v100|pair|a|a|1": [ok, {**ok, "rate": 3.0}],
        "v100|alone|b|1": [{"error": "ValueError: boom"}],
        "v100|pair|a|b|1": [ok, ok],
    }
    out = table(todo, results, {"source": "test"})
    missing = {m["id"]: m["why"] for m in out["provenance"]["missing"]}
    assert missing == {
        "v100|alone|b|1": "ValueError: boom",
        "v100|pair|a|b|1": "a side has no rate alone on this GPU type",
        "v100|pair|b|b|1": "not measured",
    }
    f = tmp_path / "p.json"
    f.write_text(json.dumps(out))
    model = load_gavel_throughputs(f)
    assert model.alone == {("a", 1): {"v100": 4.0}}
    assert model.pairs[("a", 1)]["v100"][("a", 1)] == (4.0, 3.0)
