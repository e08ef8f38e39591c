"""The restart model's constants are their sources' (#29, item 3): the live resize
benchmark's medians, the H200 warm spare's floor and the cold start beside it; the policy
and the simulator use it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from lyra_ray.model import JobSpec
from lyra_ray.model.restart_cost import (
    H200_COLD_START_S,
    H200_WARM_SPARE_S,
    MEASURED,
    RESTART_S,
    RestartModel,
)
from lyra_ray.policies.lyra.two_phase import LyraPolicy
from lyra_ray.runtime.restart_phases import PHASES

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "gpu" / "h200.json"


def test_the_phases_are_the_benchmark_medians() -> None:
    med = json.loads((ROOT / "benchmarks/results/resize_phases.json").read_text())["median_s"]
    for phase in PHASES:
        assert getattr(MEASURED, phase) == med[phase], phase


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data absent")
def test_the_cold_start_is_the_h200_files() -> None:
    runs = json.loads(SHARED.read_text())["cold_start_resnet50"]["runs"]
    assert round(statistics.median(r["total"] for r in runs), 2) == H200_COLD_START_S


def test_the_floor_is_the_h200_warm_spare() -> None:
    """The floor is a spare's first run on its GPU (CUDA initialised then, as the warm
    worker does), measured on the H200; it sits between the same worker's loop called
    again and a worker started from nothing, which is what it stands for."""
    got = json.loads((ROOT / "benchmarks/results/gpu_warm_restart.json").read_text())
    cold_spares = [s for s in got["spares"] if not s["warmed_up"]]
    assert len(cold_spares) >= 3
    firsts = [s["device_init"] + s["generations"][0]["total"] for s in cold_spares]
    assert round(statistics.median(firsts), 2) == H200_WARM_SPARE_S == MEASURED.worker_floor_s
    again = got["median_s"]["same_worker_again"]["total"]
    assert again < H200_WARM_SPARE_S < H200_COLD_START_S


def test_one_number_for_the_policy_and_the_simulator() -> None:
    worker = max(MEASURED.workers_up_s + MEASURED.first_step_s, MEASURED.worker_floor_s)
    assert (
        round(MEASURED.stop_signal_s + MEASURED.checkpoint_s + MEASURED.relaunch_s + worker, 1)
        == RESTART_S
    )
    assert LyraPolicy().resize_cost_s is None  # priced per job by the restart model:
    plain = JobSpec("j", 1.0, throughput={"v100": 1.0})
    assert round(RestartModel().price("j", plain), 1) == RESTART_S
    from lyra_ray.cli.main import build_parser

    args = build_parser().parse_args(["simulate", "--trace", "x.yaml"])
    assert args.resize_overhead is None  # resolved to RESTART_S, 0 for Gavel traces


def test_the_checkpoint_costs_are_the_benchmarks_fit() -> None:
    from lyra_ray.model.restart_cost import RESTORE_S_PER_GB, SAVE_S_PER_GB

    fit = json.loads((ROOT / "benchmarks/results/checkpoint_io.json").read_text())
    assert fit["save"]["s_per_gb"] == SAVE_S_PER_GB
    assert fit["restore"]["s_per_gb"] == RESTORE_S_PER_GB
