"""`lyra moe plan --eplb-out`: the placement as SGLang's ``--init-expert-location`` JSON.

The layout (docs/moe.md cites the code it was checked against): exactly one key,
``physical_to_logical_map``, one row per layer of the model (dense layers too), the logical
expert of each physical slot, GPU ``p // slots_per_gpu`` holding slot ``p``. That is
DeepSeek EPLB's ``phy2log``: with ``--algorithm eplb-hierarchical`` the CLI reproduces the
example in EPLB's README exactly; every other algorithm writes a valid map.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lyra_ray.moe_serving.cli import main
from lyra_ray.moe_serving.engine_map import check_map, physical_to_logical
from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.planner import plan_for_batch, plan_lina

README_WEIGHT = [
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
]
README_PHY2LOG = [
    [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
    [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1],
]
"""deepseek-ai/EPLB's README (commit d52c72d5): 2 layers x 12 experts, 16 replicas, 4
groups, 2 nodes, 8 GPUs; ``print(phy2log)``."""

DATA = Path(
    os.environ.get(
        "LYRA_SHARED_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    )
)
DECODE = DATA / "moe" / "deepseek_v3_expert_load_decode_in1000out1000.json"


def _plan(tmp_path: Path, load: Path, *flags: str) -> dict:
    out = tmp_path / "map.json"
    rc = main(["moe", "plan", "--load", str(load), "--eplb-out", str(out), *flags])
    assert rc == 0
    data: dict = json.loads(out.read_text())
    return data


def test_eplb_hierarchical_reproduces_the_eplb_readme_example(tmp_path: Path) -> None:
    load = tmp_path / "load.json"
    load.write_text(json.dumps({"logical_count": README_WEIGHT}))
    flags = ["--gpus", "8", "--replicas", "16", "--groups", "4", "--nodes", "2"]
    data = _plan(tmp_path, load, "--algorithm", "eplb-hierarchical", *flags)
    assert data == {"physical_to_logical_map": README_PHY2LOG}


ALGORITHMS = [
    ("--algorithm", "lina"),
    ("--algorithm", "eplb-global"),
    ("--algorithm", "eplb-hierarchical", "--groups", "4", "--nodes", "2"),
    ("--algorithm", "lina", "--batch-tokens", "16", "--expert", "4096x14336"),  # decode
    ("--algorithm", "lina", "--batch-tokens", "16:0.7,65536:0.3", "--expert", "4096x14336"),
]


@pytest.mark.parametrize("flags", ALGORITHMS)
def test_every_algorithm_writes_a_valid_map(tmp_path: Path, flags: tuple[str, ...]) -> None:
    rng = np.random.default_rng(0)
    raw = np.vstack([np.zeros((1, 16)), rng.pareto(1.2, size=(4, 16)) * 100])  # 1 dense layer
    load = tmp_path / "load.json"
    load.write_text(json.dumps({"logical_count": raw.tolist()}))
    data = _plan(tmp_path, load, "--gpus", "8", "--replicas", "24", *flags)
    check_map(data, layers=5, experts=16, physical=24)
    assert data["physical_to_logical_map"][0] == [p % 16 for p in range(24)]  # SGLang's trivial


@pytest.mark.data
@pytest.mark.skipif(not DECODE.exists(), reason="../shared/data/moe not present")
@pytest.mark.parametrize(
    "flags",
    [
        ("--algorithm", "lina"),
        ("--algorithm", "eplb-global"),
        ("--algorithm", "eplb-hierarchical"),
        ("--algorithm", "lina", "--batch-tokens", "1024"),
        ("--algorithm", "lina", "--batch-tokens", "262144"),
    ],
)
def test_deepseek_v3_maps_have_every_layer_and_slot(tmp_path: Path, flags) -> None:
    data = _plan(tmp_path, DECODE, "--gpus", "32", "--replicas", "288", *flags)
    check_map(data, layers=61, experts=256, physical=288)


def test_each_gpus_slots_hold_what_the_plan_put_there() -> None:
    rng = np.random.default_rng(1)
    load = rng.pareto(1.2, size=(3, 16)) * 100
    for plan in (
        plan_lina(load, 24, 8, 3),
        plan_for_batch(load, 24, 8, 16.0, ExpertCost(4096, 14336), slots=3),  # slots left empty
    ):
        phy = physical_to_logical(plan)
        for i in range(3):
            for g in range(8):
                mine = sorted(plan.replica_expert[i][plan.replica_device[i] == g].tolist())
                slots = phy[i, g * 3 : (g + 1) * 3].tolist()
                assert set(slots) == set(mine), (i, g, slots, mine)  # filled with its own
                for e in mine:
                    assert slots.count(e) >= mine.count(e)


def test_bad_input_names_the_flag(tmp_path: Path) -> None:
    load = tmp_path / "load.json"
    load.write_text(json.dumps({"logical_count": README_WEIGHT}))
    cli = [sys.executable, "-m", "lyra_ray.moe_serving.cli", "moe", "plan", "--load", str(load)]
    cases = [
        (["--gpus", "5", "--replicas", "16", "--eplb-out", str(tmp_path / "x.json")], "--eplb-out"),
        (["--gpus", "4", "--replicas", "16", "--eplb-out", str(tmp_path)], "--eplb-out"),
        (["--gpus", "4", "--replicas", "16", "--batch-tokens", "0"], "--batch-tokens"),
        (["--gpus", "4", "--replicas", "16", "--batch-tokens", "8", "--expert", "7x"], "--expert"),
        (["--gpus", "4", "--replicas", "16", "--batch-tokens", "8", "--gpu", "a1"], "--gpu"),
    ]
    for flags, name in cases:
        r = subprocess.run([*cli, *flags], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and name in r.stderr and "Traceback" not in r.stderr, r.stderr
    for bad in ({"x": 1}, {"physical_to_logical_map": [[0, 0]]}):
        with pytest.raises(ValueError, match="expert location"):
            check_map(bad, layers=1, experts=2, physical=2)
