"""Replica planners: invariants (hypothesis), phase 2, EPLB baselines, real DeepSeek loads, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.moe_serving.cli import main
from lyra_ray.moe_serving.eplb import plan_eplb
from lyra_ray.moe_serving.packing import apportion, expand, greedy_pack, refine_swaps
from lyra_ray.moe_serving.plan_io import LoadFileError, read_load_file
from lyra_ray.moe_serving.planner import (
    Placement,
    device_loads,
    max_over_mean,
    plan_lina,
    replan,
)

DATA = Path(
    os.environ.get(
        "LYRA_SHARED_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    )
)
DEEPSEEK = sorted((DATA / "moe").glob("deepseek_v3_expert_load_*.json"))


def _zipf_loads(rng: np.random.Generator, layers: int, experts: int, skew: float) -> np.ndarray:
    base = (1.0 + np.arange(experts)) ** -skew
    return np.stack([rng.permutation(base) * rng.uniform(1e3, 1e5) for _ in range(layers)])


def _check_invariants(plan: Placement, load: np.ndarray, replicas: int) -> None:
    counts = plan.counts
    assert (counts >= 1).all(), "every expert needs a replica"
    assert (counts.sum(1) == replicas).all(), "budget must be used exactly"
    assert plan.replica_device.min() >= 0 and plan.replica_device.max() < plan.devices
    for row in plan.replica_device:
        assert np.bincount(row, minlength=plan.devices).max() <= plan.slots
    np.testing.assert_allclose(device_loads(load, plan).sum(1), load.sum(1), rtol=1e-9)


loads_strategy = st.tuples(
    st.integers(0, 10_000), st.integers(1, 4), st.integers(2, 24), st.floats(0.0, 2.5)
)


@settings(max_examples=60, deadline=None)
@given(params=loads_strategy, extra=st.integers(0, 30), devices=st.integers(1, 12))
def test_lina_plan_invariants(
    params: tuple[int, int, int, float], extra: int, devices: int
) -> None:
    seed, layers, experts, skew = params
    load = _zipf_loads(np.random.default_rng(seed), layers, experts, skew)
    replicas = experts + extra
    plan = plan_lina(load, replicas, devices)
    _check_invariants(plan, load, replicas)
    assert (max_over_mean(load, plan) >= 1.0 - 1e-9).all()


@settings(max_examples=40, deadline=None)
@given(params=loads_strategy, extra=st.integers(0, 30))
def test_apportion_minimises_max_load_per_replica(
    params: tuple[int, int, int, float], extra: int
) -> None:
    """Divisor method: no move of one replica between experts lowers the max load/replica."""
    seed, layers, experts, skew = params
    load = _zipf_loads(np.random.default_rng(seed), layers, experts, skew)
    counts = apportion(load, experts + extra)
    worst = (load / counts).max(1)
    for i in range(layers):
        for src in np.flatnonzero(counts[i] > 1):
            for dst in range(experts):
                c = counts[i].copy()
                c[src] -= 1
                c[dst] += 1
                assert (load[i] / c).max() >= worst[i] - 1e-9


@settings(max_examples=40, deadline=None)
@given(params=loads_strategy, devices=st.integers(1, 8), per=st.integers(1, 5))
def test_swaps_never_worsen_greedy(
    params: tuple[int, int, int, float], devices: int, per: int
) -> None:
    seed, layers, experts, skew = params
    load = _zipf_loads(np.random.default_rng(seed), layers, experts, skew)
    replicas = max(experts, devices * per)
    slots = -(-replicas // devices)
    _, weights = expand(apportion(load, replicas), load)
    greedy = greedy_pack(weights, devices, slots)
    refined = refine_swaps(weights, greedy, devices, slots)
    peak = lambda d: np.array([np.bincount(d[i], weights[i], devices).max() for i in range(layers)])  # noqa: E731
    assert (peak(refined) <= peak(greedy) + 1e-9).all()
    assert all(np.bincount(r, minlength=devices).max() <= slots for r in refined)


@settings(max_examples=30, deadline=None)
@given(params=loads_strategy, devices=st.sampled_from([2, 4, 8]), per=st.integers(1, 6))
def test_eplb_invariants(params: tuple[int, int, int, float], devices: int, per: int) -> None:
    seed, layers, experts, skew = params
    experts = max(devices, experts - experts % devices)
    load = _zipf_loads(np.random.default_rng(seed), layers, experts, skew)
    replicas = devices * max(per, -(-experts // devices))
    plan = plan_eplb(load, replicas, devices)
    _check_invariants(plan, load, replicas)
    for row in plan.replica_device:  # EPLB fills every GPU exactly
        assert (np.bincount(row, minlength=devices) == replicas // devices).all()


def test_eplb_hierarchical_keeps_groups_on_one_node() -> None:
    load = _zipf_loads(np.random.default_rng(3), 3, 32, 1.2)
    plan = plan_eplb(load, 64, devices=8, groups=4, nodes=2)
    _check_invariants(plan, load, 64)
    node = plan.replica_device // 4
    group = plan.replica_expert // 8
    for i in range(3):
        for g in range(4):
            assert len(set(node[i][group[i] == g].tolist())) == 1


def test_lina_at_least_as_balanced_as_eplb_on_zipf_loads() -> None:
    rng = np.random.default_rng(11)
    for skew in (0.5, 1.0, 1.5):
        load = _zipf_loads(rng, 8, 64, skew)
        ours = max_over_mean(load, plan_lina(load, 96, 16))
        eplb = max_over_mean(load, plan_eplb(load, 96, 16))
        assert (ours <= eplb + 1e-9).all()


def test_replan_only_touches_deviating_layers() -> None:
    load = _zipf_loads(np.random.default_rng(5), 3, 8, 1.0)
    plan = plan_lina(load, 16, 4)
    same, layers = replan(plan, load * 3.0, threshold=0.1)  # same shares: nothing to do
    assert layers == [] and same is plan
    actual = load.copy()
    actual[1] = actual[1][::-1]
    new, layers = replan(plan, actual, threshold=0.1)
    assert layers == [1]
    np.testing.assert_array_equal(new.replica_expert[[0, 2]], plan.replica_expert[[0, 2]])
    _check_invariants(new, actual, 16)
    assert max_over_mean(actual, new)[1] < max_over_mean(actual, plan)[1]


@pytest.mark.data
@pytest.mark.skipif(not DEEPSEEK, reason="shared DeepSeek-V3 load data absent")
@pytest.mark.parametrize("path", DEEPSEEK, ids=lambda p: p.stem)
def test_deepseek_loads_lina_vs_eplb_global(path: Path) -> None:
    load, layers = read_load_file(path)
    assert load.shape[1] == 256 and len(layers) == load.shape[0] == 58
    ours = plan_lina(load, 288, 32)
    eplb = plan_eplb(load, 288, 32)
    _check_invariants(ours, load, 288)
    _check_invariants(eplb, load, 288)
    ours_mom, eplb_mom = max_over_mean(load, ours), max_over_mean(load, eplb)
    assert ours_mom.mean() <= eplb_mom.mean()
    assert ours_mom.max() <= eplb_mom.max()
    assert (ours_mom <= eplb_mom + 1e-12).all(), "ours must not lose on any layer"


def _write(tmp: Path, obj: object) -> Path:
    p = tmp / "load.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "malformed JSON"),
        ({"counts": []}, "logical_count"),
        ({"logical_count": [[1, 2], [3]]}, "differ in length"),
        ({"logical_count": [[1, "x"]]}, "numbers"),
        ({"logical_count": [[1, -2]]}, "non-negative"),
        ({"logical_count": [[0, 0]]}, "all zeros"),
    ],
)
def test_bad_load_files_are_refused_by_name(tmp_path: Path, content: object, needle: str) -> None:
    p = _write(tmp_path, content)
    with pytest.raises(LoadFileError, match=needle) as err:
        read_load_file(p)
    assert str(p) in str(err.value)


def test_cli_plan_writes_report(tmp_path: Path) -> None:
    load = _zipf_loads(np.random.default_rng(2), 4, 16, 1.0)
    load[0] = 0  # a dense layer: skipped
    src = _write(tmp_path, {"logical_count": load.tolist()})
    out = tmp_path / "out.json"
    for algo in ("lina", "eplb-global", "eplb-hierarchical"):
        rc = main(
            [
                "moe",
                "plan",
                "--load",
                str(src),
                "--gpus",
                "4",
                "--replicas",
                "24",
                "--algorithm",
                algo,
                "--groups",
                "4",
                "--nodes",
                "2",
                "--json",
                str(out),
            ]
        )
        assert rc == 0
        rep = json.loads(out.read_text())
        assert {"max_over_mean", "max_over_mean_worst", "per_layer", "plan_s"} <= rep.keys()
        assert [r["layer"] for r in rep["per_layer"]] == [1, 2, 3]
        assert rep["max_over_mean_worst"] >= rep["max_over_mean"] >= 1.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--load", "/nonexistent/x.json", "--gpus", "4", "--replicas", "24"], "no such file"),
        (["--gpus", "4", "--replicas", "8"], "--replicas (8) must be >="),
        (["--gpus", "2", "--replicas", "24", "--slots", "4"], "do not fit"),
        (["--gpus", "5", "--replicas", "24", "--algorithm", "eplb-global"], "divisible"),
    ],
)
def test_cli_bad_input_exits_2_without_traceback(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    load = _zipf_loads(np.random.default_rng(2), 2, 16, 1.0)
    src = _write(tmp_path, {"logical_count": load.tolist()})
    full = ["moe", "plan", *(["--load", str(src)] if "--load" not in args else []), *args]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "lyra_ray.moe_serving.cli", *full],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_pure_modules_do_not_import_ray() -> None:
    code = (
        "import sys; from lyra_ray.moe_serving import model, popularity, planner, "
        "eplb, packing, plan_io, experts, workload, cli, hf_moe, popularity_map, "
        "batch_regime; "
        "import "
        "benchmarks.moe.estimator_eval; "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=root,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
