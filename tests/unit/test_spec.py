import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_cluster, parse_job_list, parse_job_spec


def test_valid_elastic_and_fixed_jobs() -> None:
    specs = parse_job_list(
        "jobs:\n - {name: A, total_steps: 300, min_workers: 2, max_workers: 6,"
        " throughput: {V100: 1}}\n"
        " - {name: B, total_steps: 10, workers: 4, job_type: resnet50}\n",
        "x.yaml",
    )
    assert (specs[0].min_workers, specs[0].max_workers, specs[0].elastic) == (2, 6, True)
    assert specs[0].throughput == {"v100": 1.0}
    assert (specs[1].min_workers, specs[1].max_workers, specs[1].elastic) == (4, 4, False)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"name": "a", "total_steps": -1, "throughput": {"v100": 1}}, "total_steps"),
        (
            {
                "name": "a",
                "total_steps": 1,
                "min_workers": 3,
                "max_workers": 2,
                "throughput": {"v100": 1},
            },
            "min_workers (3) > max_workers (2)",
        ),
        ({"name": "a", "total_steps": 1}, "throughput"),
        ({"name": "a", "total_steps": 1, "throughput": {"v100": 0}}, "throughput"),
        ({"name": "a", "total_steps": 1, "throughput": {"v100": 1}, "bogus": 1}, "bogus"),
        (
            {"name": "a", "total_steps": 1, "throughput": {"v100": 1}, "entrypoint": "x y"},
            "entrypoint",
        ),
    ],
)
def test_bad_job_names_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_job_spec(raw, "f.yaml: jobs[0]")
    assert field in str(e.value) and "f.yaml: jobs[0]" in str(e.value)


def test_unknown_gpu_type_and_job_type() -> None:
    with pytest.raises(InputError, match="field 'throughput': no GPU type the job can run on"):
        parse_job_spec(
            {"name": "a", "total_steps": 1, "throughput": {"h900": 1}},
            "j",
            known_gpu_types={"v100"},
        )
    # Types the cluster lacks are unused, not an error, while one it has is usable.
    spec = parse_job_spec(
        {"name": "a", "total_steps": 1, "throughput": {"h900": 1, "v100": 2}},
        "j",
        known_gpu_types={"v100", "k80"},
    )
    assert spec.throughput == {"h900": 1, "v100": 2}
    with pytest.raises(InputError, match="field 'job_type': unknown job type 'nope'"):
        parse_job_spec(
            {"name": "a", "total_steps": 1, "job_type": "nope"}, "j", known_job_types={"resnet50"}
        )


def test_malformed_yaml_names_line() -> None:
    with pytest.raises(InputError, match=r"x.yaml: line \d+: malformed YAML"):
        parse_job_list("jobs:\n  - name: [unclosed\n", "x.yaml")


def test_duplicate_names_refused() -> None:
    with pytest.raises(InputError, match="duplicate job name"):
        parse_job_list(
            "jobs:\n - {name: a, total_steps: 1, throughput: {v100: 1}}\n"
            " - {name: a, total_steps: 1, throughput: {v100: 1}}\n",
            "x",
        )


def test_cluster_spec() -> None:
    nodes = parse_cluster("v100=5,K80=2", gpus_per_node=4)
    assert [(n.gpu_type, n.num_gpus) for n in nodes] == [("v100", 4), ("v100", 1), ("k80", 2)]
    for bad in ("v100", "v100=x", "v100=1,v100=2", "=3", "v100=0"):
        with pytest.raises(InputError, match="cluster spec"):
            parse_cluster(bad)
