"""Lyra through the real core and simulator: the paper's example, loaning and reclaims."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray.cli import main
from lyra_ray.model import JobSpec, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.sim.serving import DemandPoint, demand_events, diurnal
from lyra_ray.sim.simulator import Simulator

DATA = Path(__file__).resolve().parents[1] / "data"


def _simulate(tmp_path: Path, trace: str, cluster: str, policy: str) -> dict[str, object]:
    out = tmp_path / f"{policy}.json"
    rc = main(
        [
            "simulate",
            "--format",
            "yaml",
            "--trace",
            str(DATA / trace),
            "--cluster",
            cluster,
            "--policy",
            policy,
            "--resize-overhead",
            "0",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    result: dict[str, object] = json.loads(out.read_text())
    return result


def test_paper_example_reaches_the_best_average_jct(tmp_path: Path) -> None:
    res = _simulate(tmp_path, "lyra_example.yaml", "v100=8", "lyra")
    assert res["avg_jct_s"] == pytest.approx(125.0 / 3, abs=1e-6)  # (63.33 + 20) / 2
    assert res["completed_jobs"] == 2


def test_capped_job_goes_first(tmp_path: Path) -> None:
    res = _simulate(tmp_path, "lyra_capped.yaml", "v100=5", "lyra")
    assert res["avg_jct_s"] == pytest.approx(13.0, abs=1e-6)
    greedy = _simulate(tmp_path, "lyra_capped.yaml", "v100=5", "basic")
    assert greedy["avg_jct_s"] == pytest.approx((5.25 + 21.625) / 2, abs=1e-6)


def _loan_cluster() -> list[Node]:
    train = [Node(f"v{i}", "v100", 4) for i in range(2)]
    infer = [Node(f"i{i}", "t4", 1, "inference") for i in range(6)]
    return train + infer


def _loan_jobs() -> list[JobSpec]:
    jobs = []
    for i in range(10):
        elastic = i % 2 == 0
        jobs.append(
            JobSpec(
                name=f"j{i}",
                total_steps=2000.0 + 300 * i,
                arrival_s=60.0 * i,
                min_workers=1 if elastic else 2,
                max_workers=4 if elastic else 2,
                throughput={"v100": 1.0, "t4": 0.5},
            )
        )
    return jobs


def _run(policy: str, demand: list[tuple[float, int]]) -> dict[str, object]:
    sim = Simulator(
        _loan_cluster(),
        get_policy(policy),
        SpecThroughputs(),
        resize_overhead_s=10.0,
        serving_demand=demand,
    )
    return sim.run(_loan_jobs()).summary


DEMAND = [(0.0, 1), (400.0, 3), (900.0, 6), (1500.0, 2), (2500.0, 5)]


def test_loaning_uses_idle_inference_servers() -> None:
    lyra, base = _run("lyra", DEMAND), _run("lyra-baseline", DEMAND)
    assert lyra["completed_jobs"] == base["completed_jobs"] == 10
    assert base["reclaims"] == 0 and base["on_loan_utilisation"] == 0.0
    assert lyra["reclaims"] > 0
    assert 0.0 < lyra["on_loan_utilisation"] <= 1.0  # type: ignore[operator]
    assert lyra["avg_queue_s"] <= base["avg_queue_s"]  # type: ignore[operator]


def test_knapsack_reclaim_preempts_no_more_than_naive() -> None:
    lyra, basic = _run("lyra", DEMAND), _run("basic", DEMAND)
    assert lyra["reclaim_preemptions"] <= basic["reclaim_preemptions"]  # type: ignore[operator]


def test_same_seed_same_result() -> None:
    demand = [(p[0], p[1].servers) for p in demand_events(diurnal(6, 4000, step_s=300, seed=7))]
    a, b = _run("lyra", demand), _run("lyra", demand)
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_serving_demand_points_become_events_only_on_change() -> None:
    pts = [DemandPoint(0, 2), DemandPoint(10, 2), DemandPoint(20, 3)]
    assert [(t, e.servers) for t, e in demand_events(pts)] == [(0, 2), (20, 3)]


# ----------------------------------------------------------------------------- serving demand


def test_demand_csv_round_trip_and_errors_name_file_line_field(tmp_path: Path) -> None:
    from lyra_ray.model.errors import InputError
    from lyra_ray.sim.serving import read_demand_csv

    good = tmp_path / "d.csv"
    good.write_text("time_s,servers\n0,3\n\n60,5\n")
    assert read_demand_csv(good) == [DemandPoint(0.0, 3), DemandPoint(60.0, 5)]
    cases = {
        "time_s,servers\n0,x\n": "line 2: field 'servers'",
        "time_s,servers\n0,1\nabc,2\n": "line 3: field 'time_s'",
        "time_s,servers\n10,1\n5,2\n": "line 3: field 'time_s'",
        "time_s,servers\n0,-1\n": "line 2: field 'servers'",
        "time,servers\n": "line 1: header",
        "time_s,servers\n0,1,2\n": "line 2: expected 2 fields",
    }
    for text, msg in cases.items():
        bad = tmp_path / "bad.csv"
        bad.write_text(text)
        with pytest.raises(InputError, match=msg) as e:
            read_demand_csv(bad)
        assert str(bad) in str(e.value)
    with pytest.raises(InputError, match="cannot read"):
        read_demand_csv(tmp_path / "missing.csv")


def test_diurnal_curve_is_seeded_bounded_and_near_its_mean() -> None:
    from lyra_ray.sim.serving import mean_utilisation

    a = diurnal(20, 7 * 86_400, seed=3)
    assert a == diurnal(20, 7 * 86_400, seed=3)
    assert a != diurnal(20, 7 * 86_400, seed=4)
    assert all(0 <= p.servers <= 20 for p in a)
    # ~40 % mean utilisation (rounding up to whole servers adds a little).
    assert 0.35 < mean_utilisation(a, 20) < 0.5
    # Diurnal: the peak hour needs clearly more servers than the trough.
    by_hour = [p.servers for p in a if abs((p.time_s % 86_400) - 14 * 3600) < 1]
    low = [p.servers for p in a if abs((p.time_s % 86_400) - 2 * 3600) < 1]
    assert min(by_hour) > max(low)


def _loan_cli(tmp_path: Path, *extra: str) -> dict[str, object]:
    trace = tmp_path / "jobs.yaml"
    trace.write_text(
        "jobs:\n"
        + "".join(
            f"  - {{name: j{i}, arrival_s: {60 * i}, total_steps: 2000, min_workers: 1,"
            f" max_workers: 4, throughput: {{v100: 1.0, t4: 0.5}}}}\n"
            for i in range(6)
        )
    )
    out = tmp_path / "r.json"
    args = ["simulate", "--trace", str(trace), "--cluster", "v100=4", "--gpus-per-node", "1"]
    rc = main([*args, "--policy", "lyra", "--json", str(out), "--quiet", *extra])
    assert rc == 0
    result: dict[str, object] = json.loads(out.read_text())
    return result


def test_simulate_lends_inference_servers_by_flag(tmp_path: Path) -> None:
    busy = tmp_path / "busy.csv"
    busy.write_text("time_s,servers\n0,4\n")
    alone = _loan_cli(tmp_path, "--inference", "t4=4", "--serving-demand", str(busy))
    assert alone["on_loan_utilisation"] == 0.0
    demand = tmp_path / "demand.csv"
    demand.write_text("time_s,servers\n0,0\n100000,4\n")
    lent = _loan_cli(tmp_path, "--inference", "t4=4", "--serving-demand", str(demand))
    assert lent["meta"]["inference"] == "t4=4"  # type: ignore[index]
    assert lent["on_loan_utilisation"] > 0.5  # type: ignore[operator]
    assert lent["avg_jct_s"] < alone["avg_jct_s"]  # type: ignore[operator]
    diurnal_run = _loan_cli(tmp_path, "--inference", "t4=4")
    assert diurnal_run["meta"]["serving_demand"] is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--serving-demand", "diurnal"], "--serving-demand"),
        (["--inference", "t4=0"], "--inference"),
    ],
)
def test_simulate_serving_flags_reject_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], field: str
) -> None:
    trace = DATA / "lyra_example.yaml"
    rc = main(["simulate", "--trace", str(trace), "--cluster", "v100=8", "--quiet", *extra])
    assert rc == 2
    assert field in capsys.readouterr().err


def test_simulate_rejects_demand_above_the_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demand = tmp_path / "d.csv"
    demand.write_text("time_s,servers\n0,9\n")
    trace = DATA / "lyra_example.yaml"
    args = ["--inference", "t4=2", "--serving-demand", str(demand)]
    rc = main(["simulate", "--trace", str(trace), "--cluster", "v100=8", "--quiet", *args])
    assert rc == 2
    assert "'servers'" in capsys.readouterr().err


def test_the_report_counts_in_the_live_metrics_names() -> None:
    """The simulator's ``metrics`` use the live exporter's names and count alike: each
    action counter equals the report's own figure, and the uses of a pool partition it."""
    s = _run("lyra", DEMAND)
    mx = s["metrics"]
    assert isinstance(mx, dict)
    assert mx["lyra_preemptions_total"] == s["preemptions"]
    assert mx["lyra_resizes_total"] == s["resizes"]
    assert mx["lyra_reclaims_total"] == s["reclaims"] > 0
    # every server starts lent or serving; each later lend follows a reclaim of it
    assert mx["lyra_lends_total"] >= mx["lyra_reclaims_total"]
    assert mx["lyra_launches_total"] >= s["completed_jobs"]
    train = ["lyra_gpus{pool=training,use=training}", "lyra_gpus{pool=training,use=idle}"]
    assert sum(mx[k]["mean"] for k in train) == pytest.approx(8.0)  # 2 x 4 V100s
    infer = [f"lyra_gpus{{pool=inference,use={u}}}" for u in ("serving", "lent", "idle")]
    assert sum(mx[k]["mean"] for k in infer) == pytest.approx(6.0)  # 6 x 1 T4
    assert 0 < mx["lyra_gpus{pool=inference,use=lent}"]["mean"] <= 6.0
    from lyra_ray.telemetry.catalogue import metric

    for key in mx:
        metric(key.split("{")[0])  # every name is a real lyra metric


def test_lend_delay_and_mixed_types_survive_a_restart() -> None:
    """The lend delay's memory of demand is policy state: a core restored from JSON with
    a fresh policy decides as the one that died (and mixed-type assignments go through
    the saved state whole)."""
    import dataclasses

    from lyra_ray import model as m
    from lyra_ray.policies.lyra.two_phase import LyraPolicy
    from lyra_ray.scheduling.core import SchedulerCore

    kw = {"reserve_fraction": 0.0, "lend_after_s": 600.0}
    specs = [dataclasses.replace(s, scaling="imagenet") for s in _loan_jobs()]
    sim = Simulator(_loan_cluster(), LyraPolicy(**kw), SpecThroughputs(), serving_demand=[])
    sim.max_time_s = 250.0
    core = sim.run(specs).core
    assert core.policy.to_state()["demand"]
    assert any(j.current is not None and j.current.extra for j in core.active())
    state = json.loads(json.dumps(core.to_state()))
    twin = SchedulerCore(LyraPolicy(**kw), SpecThroughputs())
    twin.load_state(state)
    assert twin.to_state() == state
    steps = [(251.0, [m.ServingDemand(2)]), (400.0, [m.ServingDemand(1)]), (700.0, [])]
    for t, events in [*steps, (1100.0, [m.ServingDemand(0)]), (1300.0, [])]:
        assert twin.step(t, events) == core.step(t, events), t
    assert twin.to_state() == core.to_state()


def test_a_scheduler_saved_with_a_lend_delay_restores_without_one() -> None:
    """A scheduler that saved its demand memory under ``lend_after_s=600`` (the default
    until it was re-chosen) restarts on a policy without a delay: the memory is dropped,
    not refused, so the restart loses nothing; any other key is still refused."""
    import pytest

    from lyra_ray.policies.lyra.two_phase import LyraPolicy

    before = LyraPolicy(lend_after_s=600.0)
    before.load_state({"demand": [[0.0, 2], [60.0, 1]]})
    saved = json.loads(json.dumps(before.to_state()))
    now = LyraPolicy()
    now.load_state(saved)
    assert now.to_state() == {}
    with pytest.raises(ValueError, match="keeps no state"):
        now.load_state({**saved, "other": 1})
