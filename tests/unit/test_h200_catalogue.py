"""The H200 rows of the catalogue are the measurements, with their provenance (#28)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from lyra_ray.model.catalogue import CATALOGUE, ESTIMATED, MEASURED_GPU_TYPES, pair_rates
from lyra_ray.model.measured import H200_FILE, h200_table, load_packaged
from lyra_ray.model.throughput import catalogue_throughputs, load_gavel_throughputs
from tests.builders import job

SOURCE = Path(__file__).resolve().parents[3] / "shared" / "data" / "gpu" / "h200.json"


def test_the_packaged_table_says_where_it_came_from() -> None:
    table = load_packaged(H200_FILE)
    prov = table["provenance"]
    assert prov["source"] == "measured" and "H200" in prov["gpu"]
    assert prov["measured"].startswith("2026-11-26")
    assert set(prov["jobs"]) == set(ESTIMATED)  # every catalogue type was measured
    assert {"h200"} == MEASURED_GPU_TYPES


@pytest.mark.data
@pytest.mark.skipif(not SOURCE.exists(), reason="../shared/data absent")
def test_the_packaged_table_equals_the_measurements() -> None:
    raw = json.loads(SOURCE.read_text())
    assert load_packaged(H200_FILE) == json.loads(json.dumps(h200_table(raw)))
    for name, rate in raw["alone_steps_per_s"]["median"].items():
        assert CATALOGUE[name]["h200"] == rate
    for p in raw["pairs"]:
        a, b = p["a"], p["b"]
        pa, pb = pair_rates(a, b, "h200")
        assert pa == pytest.approx(
            min(statistics.fmean(p["steps_per_s_a"]), CATALOGUE[a]["h200"]), abs=1e-3
        )
        assert pb == pytest.approx(
            min(statistics.fmean(p["steps_per_s_b"]), CATALOGUE[b]["h200"]), abs=1e-3
        )


def test_h200_pairs_are_measured_per_pair_not_per_type() -> None:
    """A compute-heavy pair keeps about half; the same job beside a light one keeps more:
    no single share per job type says both."""
    heavy = pair_rates("resnet50", "bert", "h200")[0] / CATALOGUE["resnet50"]["h200"]
    light = pair_rates("resnet50", "a3c", "h200")[0] / CATALOGUE["resnet50"]["h200"]
    assert heavy < 0.6 < light


def test_the_scheduler_seed_uses_the_measured_pairs_on_h200() -> None:
    model = catalogue_throughputs()
    a, b = job("a", job_type="lm"), job("b", job_type="recommendation")
    assert model.throughput(a, "h200", 1) == CATALOGUE["lm"]["h200"]
    assert model.pair_throughput(a, b, "h200") == pair_rates("lm", "recommendation", "h200")


def test_the_packaged_file_loads_as_a_throughput_table() -> None:
    path = Path(__file__).resolve().parents[2] / "lyra_ray" / "model" / "data" / H200_FILE
    model = load_gavel_throughputs(path)
    assert model.gpu_types() == {"h200"} and model.predicted == frozenset()
    assert model.alone[("bert", 1)]["h200"] == CATALOGUE["bert"]["h200"]
