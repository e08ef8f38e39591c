"""One regression test per fault the hostile-input campaign found (issue #17, item 8).

Each used to escape the boundary as a traceback, or to let a value through that the
core or the store could not use; each now ends in an InputError that names the field
(exit 2 on the command line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.cli.main import main
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import load_job_file, parse_cluster, parse_job_list, parse_job_spec
from lyra_ray.model.throughput import load_gavel_throughputs
from lyra_ray.ops.local import lyra_section, parse_nodes
from lyra_ray.policies.base import PolicyError, get_policy
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.serving.spec import parse_service_spec
from lyra_ray.sim.serving import read_demand_csv
from lyra_ray.sim.traces import read_gavel_trace, read_philly_csv

JOB = {"name": "a", "total_steps": 10, "throughput": {"v100": 1.0}}
GAVEL = "ResNet-18 (batch size 16)\tcmd\tdir\t--steps\tFalse\t{steps}\t{sf}\t1\t-1\t0\n"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"total_steps": float("inf")}, "total_steps"),
        ({"total_steps": "1e309"}, "total_steps"),
        ({"throughput": {"v100": float("inf")}}, "throughput.v100"),
        ({"arrival_s": float("inf")}, "arrival_s"),
        ({"config": {"when": {1, 2}}}, "config"),
    ],
)
def test_non_finite_or_non_json_job_fields_are_refused(change: dict, field: str) -> None:
    with pytest.raises(InputError, match=f"field '{field}'"):
        parse_job_spec({**JOB, **change})


@pytest.mark.parametrize(
    "text",
    [
        "name: a\ntotal_steps: 2020-13-01\n",  # datetime's ValueError
        "!!float",  # PyYAML's IndexError
        "[" * 5000,  # RecursionError
        "\x1f",  # a multi-line ReaderError message
    ],
)
def test_yaml_the_parser_chokes_on_is_one_line_of_malformed_yaml(text: str) -> None:
    with pytest.raises(InputError, match="malformed YAML") as e:
        parse_job_list(text, "x.yaml")
    assert "\n" not in str(e.value)


def test_a_yaml_date_in_config_is_refused_before_the_store() -> None:
    text = "name: a\ntotal_steps: 1\nthroughput: {v100: 1}\nconfig: {day: 2020-01-01}\n"
    with pytest.raises(InputError, match="field 'config'"):
        parse_job_list(text, "x.yaml")


def test_a_key_with_a_newline_keeps_the_message_on_one_line() -> None:
    with pytest.raises(InputError) as e:
        parse_job_spec({**JOB, "a\nb": 1})
    assert "\n" not in str(e.value) and "a\\nb" in str(e.value)


def test_binary_files_are_refused_as_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "b.yaml"
    p.write_bytes(b"\xff\xfe\x00junk")
    for read in (load_job_file, read_gavel_trace, read_demand_csv, load_gavel_throughputs):
        with pytest.raises(InputError, match="UTF-8"):
            read(p)
    with pytest.raises(InputError, match="UTF-8"):
        lyra_section(str(p))
    with pytest.raises(InputError, match="UTF-8"):
        read_philly_csv(p)


@pytest.mark.parametrize(
    ("steps", "sf", "field"),
    [("100", "inf", "scale_factor"), ("inf", "1", "total_steps"), ("1e400", "1", "total_steps")],
)
def test_gavel_trace_numbers_must_be_finite(
    tmp_path: Path, steps: str, sf: str, field: str
) -> None:
    p = tmp_path / "t.trace"
    p.write_text(GAVEL.format(steps=steps, sf=sf))
    with pytest.raises(InputError, match=f"field '{field}'"):
        read_gavel_trace(p)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("2020-01-01", "duration"),
        ("2020-01-01,inf,1", "duration"),
        ("2020-01-01,5,1e400", "num_gpus"),
    ],
)
def test_philly_short_rows_and_infinities_name_the_field(
    tmp_path: Path, row: str, field: str
) -> None:
    p = tmp_path / "t.csv"
    p.write_text(f"timestamp,duration,num_gpus\n{row}\n")
    with pytest.raises(InputError, match=f"field '{field}'"):
        read_philly_csv(p)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({1: 2, "a": 3}, "unknown field"),
        ({"policy": 5}, "field 'policy'"),
        ({"state_dir": [1]}, "field 'state_dir'"),
        ({"grace_s": 10**400}, "field 'grace_s'"),
        ({"policy_args": {1: 2}}, "field 'policy_args'"),
    ],
)
def test_lyra_config_types_are_checked(raw: dict, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        SchedulerConfig.from_dict(raw)


def test_an_impossible_date_in_cluster_yaml_is_an_input_error(tmp_path: Path) -> None:
    p = tmp_path / "cluster.yaml"
    p.write_text("metadata:\n  lyra: {round_s: 2020-13-01}\n")
    with pytest.raises(InputError, match="malformed YAML"):
        lyra_section(str(p))


def test_counts_of_thousands_of_digits_are_refused_not_overflowed() -> None:
    with pytest.raises(InputError, match="--nodes"):
        parse_nodes("v100=" + "1" * 5000 + "x4")
    with pytest.raises(InputError, match="TYPE=COUNT"):
        parse_cluster("v100=" + "1" * 5000)


def test_service_spec_huge_numbers_and_mixed_keys() -> None:
    with pytest.raises(InputError, match=r"field 'config\.hidden'"):
        parse_service_spec({"name": "a", "model": "moe", "config": {"hidden": 10**400}})
    with pytest.raises(InputError, match="unknown field"):
        parse_service_spec({"name": "a", 1: 2, "b": 3})


@pytest.mark.parametrize("doc", ["[1]", '{"v100": [1]}', '{"v100": {"(\'a\', 1)": {"x": 1}}}'])
def test_malformed_gavel_throughputs_name_the_entry(tmp_path: Path, doc: str) -> None:
    p = tmp_path / "thr.json"
    p.write_text(doc)
    with pytest.raises(InputError):
        load_gavel_throughputs(p)


@pytest.mark.parametrize("spec", ["json:dumps", "math:pi"])
def test_a_module_attribute_that_builds_no_policy_is_a_policy_error(spec: str) -> None:
    with pytest.raises(PolicyError, match=spec):
        get_policy(spec)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--round-seconds", "nan"], "--round-seconds"),
        (["--resize-overhead", "inf"], "--resize-overhead"),
        (["--max-jobs", "-1"], "--max-jobs"),
        (["--policy", "json:dumps"], "--policy"),
    ],
)
def test_simulate_refuses_nonsense_numbers_and_policies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], flag: str
) -> None:
    trace = tmp_path / "t.yaml"
    trace.write_text("jobs:\n  - {name: a, total_steps: 10, workers: 1, throughput: {v100: 1}}\n")
    code, err = _run(
        ["simulate", "--quiet", "--trace", str(trace), "--cluster", "v100=2", *extra], capsys
    )
    assert code == 2 and flag in err and "Traceback" not in err, err


def test_plan_refuses_a_count_of_5000_digits_and_a_binary_model_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(
        ["plan", "--model", "gpt-1.3b", "--gpus", "a100=" + "9" * 5000, "--batch", "8"], capsys
    )
    assert code == 2 and "--gpus" in err
    model = tmp_path / "m.yaml"
    model.write_bytes(b"\xff\xfe\x00")
    code, err = _run(["plan", "--model", str(model), "--gpus", "a100=8", "--batch", "8"], capsys)
    assert code == 2 and "--model" in err and "UTF-8" in err
