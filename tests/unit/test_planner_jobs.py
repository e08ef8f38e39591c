"""Jobs that describe their model: the planner gives their throughput per GPU type and
size, the policies allocate by it, and the chosen plan reaches the run's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray import model as m
from lyra_ray.cli.main import main
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_list, parse_job_spec
from lyra_ray.model.state import spec_from_dict, spec_to_dict
from lyra_ray.model.throughput import SpecThroughputs, catalogue_throughputs
from lyra_ray.parallelism.inputs import parse_model
from lyra_ray.parallelism.jobs import CONFIG_KEY, best_plan, run_config
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.core import SchedulerCore

TYPES = ["a100", "v100"]
EXAMPLE = Path(__file__).parents[2] / "jobs" / "examples" / "large-models.yaml"


def model_job(name: str, model: object, **kw: object) -> m.JobSpec:
    raw = {"name": name, "total_steps": 10, "workers": 8, "model": model, **kw}
    return parse_job_spec(raw, "jobs.yaml: jobs[0]", known_gpu_types=TYPES)


def test_throughput_per_type_and_size_comes_from_the_planner() -> None:
    spec = model_job("big", {"name": "gpt-18b", "batch": 512}, workers=None, min_workers=8,
                     max_workers=16)  # fmt: skip
    assert spec.throughput is None and spec.throughput_by_size is not None
    # 294 GB of training state: not on eight 32 GB V100s, but on enough of them.
    assert 8 not in spec.throughput_by_size["v100"] and 16 in spec.throughput_by_size["v100"]
    a100 = spec.throughput_by_size["a100"]
    assert set(a100) <= set(range(8, 17)) and {8, 16} <= set(a100)
    best = best_plan(parse_model({"name": "gpt-18b", "batch": 512}), "a100", 16)
    assert best is not None and a100[16] == pytest.approx(1 / best.iteration_s)
    assert a100[16] > a100[8]
    for tm in (SpecThroughputs(), catalogue_throughputs(), m.ThroughputModel()):
        assert tm.throughput(spec, "a100", 16) == a100[16]
        assert tm.throughput(spec, "v100", 8) == 0.0
        assert 0 < tm.throughput(spec, "v100", 16) < a100[16]
        assert tm.throughput(spec, "a100", 4) == 0.0  # a size the job did not ask for


def test_a_small_model_runs_everywhere_faster_on_the_faster_gpu() -> None:
    spec = model_job("small", {"name": "gpt-350m", "batch": 64}, config={"lr": 0.1})
    rows = spec.throughput_by_size
    assert rows is not None and rows["a100"][8] > rows["v100"][8] > 0
    assert spec.config["lr"] == 0.1
    assert spec.config[CONFIG_KEY] == {"model": {"batch": 64, "name": "gpt-350m"}}


def test_the_chosen_plan_reaches_the_run_config() -> None:
    spec = model_job("small", {"name": "gpt-350m", "batch": 64}, config={"lr": 0.1})
    cfg = run_config(spec.config, "v100", 8)
    chosen = cfg[CONFIG_KEY]["plan"]
    assert chosen["t"] * chosen["p"] * chosen["d"] == 8 and chosen["gpu"] == "v100"
    assert cfg["lr"] == 0.1
    assert 1 / chosen["iteration_s"] == pytest.approx(spec.throughput_by_size["v100"][8])  # type: ignore[index]
    assert run_config({"lr": 0.1}, "v100", 8) == {"lr": 0.1}  # jobs without a model


def test_specs_with_planned_throughput_survive_json() -> None:
    spec = model_job("small", {"name": "gpt-350m", "batch": 64})
    again = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))))
    assert again == spec


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"model": {"name": "gpt-18b"}}, "field 'model.batch': required"),
        ({"model": {"layers": 2, "hidden": "x", "heads": 1, "batch": 8}}, "field 'model.hidden'"),
        ({"model": "gpt-350m"}, "field 'model.batch'"),
        ({"model": {"name": "gpt-350m", "batch": 8}, "throughput": {"a100": 1}}, "not both"),
        ({"model": {"name": "gpt-350m", "batch": 8}, "job_type": "bert"}, "not both"),
        ({"model": {"name": "gpt-350m", "batch": 8}, "config": {CONFIG_KEY: 1}}, "config."),
        ({"model": {"name": "gpt-1t", "batch": 8}}, "field 'model': gpt-1t does not fit"),
        (
            {
                "model": {"name": "gpt-350m", "batch": 8},
                "workers": None,
                "min_workers": 1,
                "max_workers": 100,
            },
            "field 'max_workers'",
        ),
    ],
)
def test_bad_model_jobs_name_the_field(extra: dict[str, object], message: str) -> None:
    raw = {"name": "j", "total_steps": 10, "workers": 8, **extra}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(InputError, match=message):
        parse_job_spec(raw, "jobs.yaml: jobs[0]", known_gpu_types=TYPES)


def test_a_gpu_type_without_hardware_numbers_is_left_out() -> None:
    raw = {"name": "j", "total_steps": 1, "workers": 2, "model": {"name": "gpt-350m", "batch": 8}}
    spec = parse_job_spec(raw, "j", known_gpu_types=["a100", "mystery9000"])
    assert set(spec.throughput_by_size or {}) == {"a100"}
    with pytest.raises(InputError, match="does not fit"):
        parse_job_spec(raw, "j", known_gpu_types=["mystery9000"])


@pytest.mark.parametrize("policy", ["max_min_fairness", "lyra", "fifo"])
def test_policies_put_a_large_model_only_where_it_fits(policy: str) -> None:
    # GPT-18B fits eight A100s but not eight V100s; GPT-350M fits both, faster on A100.
    text = """
jobs:
  - {name: big, total_steps: 100, workers: 8, model: {name: gpt-18b, batch: 512}}
  - {name: small, total_steps: 100, workers: 8, model: {name: gpt-350m, batch: 64}}
"""
    specs = parse_job_list(text, "jobs.yaml", known_gpu_types=TYPES)
    nodes = [m.Node("v100-0", "v100", 8), m.Node("v100-1", "v100", 8), m.Node("a100-0", "a100", 8)]
    core = SchedulerCore(get_policy(policy), SpecThroughputs())
    events: list[m.Event] = [m.NodeUp(n) for n in nodes]
    events += [m.JobSubmitted(s.name, s) for s in specs]
    placed: dict[str, list[str]] = {"big": [], "small": []}
    for now in range(4):  # every job launched finishes before the next step
        launched = [a for a in core.step(float(now), events).actions if isinstance(a, m.Launch)]
        for a in launched:
            placed[a.job_id].append(a.assignment.gpu_type)
        events = [m.JobCompleted(a.job_id, 100.0) for a in launched]
    assert placed["big"] == ["a100"]
    assert len(placed["small"]) == 1


@pytest.mark.parametrize("policy", ["lyra", "max_min_fairness"])
def test_the_example_model_jobs_simulate_to_completion(policy: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cluster = ["--cluster", "a100=8,v100=16", "--gpus-per-node", "8"]
    args = ["--trace", str(EXAMPLE), *cluster, "--policy", policy, "--json", str(out), "--quiet"]
    rc = main(["simulate", *args])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["completed_jobs"] == 3
