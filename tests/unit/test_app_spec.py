"""A user's own Serve application as a lyra service: its fields, a Serve config file with
``lyra:`` blocks, and what each server's copy runs (``serving/app_spec.py``,
``serving/copy_plan.py``). What only importing the app can tell is the live module's
(``tests/ray/test_live_loaning.py``)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.serving.app_spec import config_field, parse_serve_config, routes_clash
from lyra_ray.serving.capacity import check_fits, check_route
from lyra_ray.serving.copy_plan import (
    AppShape,
    DeploymentShape,
    app_target,
    check_has_gpu,
    copy_counts,
    deploy_note,
    gpu_replicas,
)
from lyra_ray.serving.spec import parse_service_spec

APP = {"name": "svc", "import_path": "my_app:app"}


def test_a_users_app_round_trips_with_serves_field_names() -> None:
    raw = {
        **APP,
        "args": {"hidden": 64, "labels": ["a", "b"]},
        "runtime_env": {"working_dir": "gcs://_ray_pkg_abc.zip", "pip": ["numpy"]},
        "deployments": [
            {
                "name": "Model",
                "max_ongoing_requests": 4,
                "autoscaling_config": {"target_ongoing_requests": 3, "max_replicas": 8},
                "ray_actor_options": {"num_gpus": 1, "label_selector": {"zone": "a"}},
                "user_config": {"threshold": 0.5},
            }
        ],
    }
    spec = parse_service_spec(raw)
    assert spec.model == "app" and spec.app is not None
    assert spec.app.deployments[0]["autoscaling_config"]["target_ongoing_requests"] == 3.0
    assert parse_service_spec(spec.to_dict()).to_dict() == spec.to_dict()


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"import_path": "nocolon"}, "'import_path'"),
        ({"import_path": "a:b:c"}, "'import_path'"),
        ({"import_path": 3}, "'import_path'"),
        ({"args": [1, 2]}, "'args'"),
        ({"args": {"x": math.nan}}, "'args'"),
        ({"args": {"x": "y" * 70_000}}, "'args'"),
        ({"runtime_env": {"conda": "env"}}, "'runtime_env'"),
        ({"runtime_env": {"env_vars": {"LYRA_TOKEN": "x"}}}, "'runtime_env.env_vars.LYRA_TOKEN'"),
        ({"deployments": {"name": "M"}}, "'deployments'"),
        ({"deployments": [{"num_replicas": 2}]}, r"'deployments\[0\]\.name'"),
        ({"deployments": [{"name": "M"}, {"name": "M"}]}, "more than once"),
        ({"deployments": [{"name": "M", "max_ongoing_request": 2}]}, "max_ongoing_request"),
        ({"deployments": [{"name": "M", "num_replicas": 0}]}, r"'deployments\[0\]\.num_replicas'"),
        ({"deployments": [{"name": "M", "num_replicas": True}]}, "num_replicas"),
        (
            {"deployments": [{"name": "M", "num_replicas": 2, "autoscaling_config": {}}]},
            "num_replicas",
        ),
        (
            {"deployments": [{"name": "M", "autoscaling_config": {"target_ongoing_requests": 0}}]},
            "target_ongoing_requests",
        ),
        (
            {
                "deployments": [
                    {"name": "M", "autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}
                ]
            },
            "min_replicas",
        ),
        ({"deployments": [{"name": "M", "placement_group_bundles": [{}]}]}, "not supported"),
        (
            {"deployments": [{"name": "M", "ray_actor_options": {"num_gpus": math.inf}}]},
            r"ray_actor_options\.num_gpus",
        ),
        (
            {"deployments": [{"name": "M", "ray_actor_options": {"runtime_env": {}}}]},
            r"ray_actor_options\.runtime_env",
        ),
        (
            {
                "deployments": [
                    {"name": "M", "ray_actor_options": {"label_selector": {"ray.io/node-id": "x"}}}
                ]
            },
            "pins each copy",
        ),
        ({"deployments": [{"name": "M", "logging_config": {"level": "x"}}]}, "['level']"),
        ({"route": "/_lyra"}, "internal route"),
        ({"route": "/_lyra/x"}, "internal route"),
        ({"route": "/a/"}, "'route'"),
        ({"model": "moe", "import_path": "m:a"}, "'import_path'.*built-in"),
    ],
)
def test_bad_app_fields_name_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=field):
        parse_service_spec({**APP, **extra})


def test_a_serve_config_with_lyra_blocks() -> None:
    raw = {
        "applications": [
            {
                "name": "a",
                "route_prefix": "/a",
                "import_path": "m:app",
                "args": {"k": 1},
                "runtime_env": {"working_dir": "."},
                "deployments": [{"name": "M", "num_replicas": "auto"}],
                "lyra": {"min_servers": 2, "smoothing_s": 4, "target_ongoing_per_replica": 1.5},
            },
            {"name": "b", "import_path": "m:other"},
        ]
    }
    a, b = (parse_service_spec(s) for s in parse_serve_config(raw))
    assert a.http_route == "/a" and a.min_servers == 2 and a.smoothing_s == 4.0
    assert a.target_ongoing_per_replica == 1.5 and a.app is not None
    assert a.app.args == {"k": 1} and a.app.deployments[0]["num_replicas"] == "auto"
    assert b.http_route == "/b"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"applications": [], "proxy_location": "HeadOnly"}, "['proxy_location']"),
        ({"applications": []}, "non-empty"),
        ({"applications": [{"name": "a", "import_path": "m:a", "host": "x"}]}, "['host']"),
        ({"applications": [{"name": "a", "import_path": "m:a", "lyra": {"x": 1}}]}, "['x']"),
        ({"applications": [{**APP}, {**APP}]}, "used twice"),
    ],
)
def test_a_serve_config_refuses_what_lyra_does_not_carry_out(raw: Any, needle: str) -> None:
    with pytest.raises(InputError, match=f".*{needle.replace('[', '.').replace(']', '.')}"):
        parse_serve_config(raw)


def test_a_config_refusal_names_where_the_field_sits() -> None:
    msg = "service 'a': field 'min_servers': must be in [1, 10000], got 0"
    assert "'applications[2].lyra.min_servers'" in config_field(msg, 2)
    assert "'applications[0].route_prefix'" in config_field("field 'route': x", 0)
    assert "'applications[1].deployments[0].name'" in config_field(
        "field 'deployments[0].name': x", 1
    )


def test_routes_that_share_requests_clash() -> None:
    assert routes_clash("/a", "/a") and routes_clash("/a", "/a/b") and routes_clash("/", "/x")
    assert not routes_clash("/a", "/ab") and not routes_clash("/a/b", "/a/c")
    spec = parse_service_spec({**APP, "route": "/api/v1"})
    with pytest.raises(InputError, match=r"'route'.*taken by service 'x'"):
        check_route(spec, {"/api": "service 'x'"})
    check_route(spec, {"/apiv2": "service 'y'"})
    nodes = {"n": Node("n", "t4", 2, pool="inference")}
    other = parse_service_spec({"name": "other", "import_path": "m:a", "route": "/api"})
    with pytest.raises(InputError, match="'route'"):
        check_fits(spec, {"other": other}, nodes)


def shape(*deps: DeploymentShape) -> AppShape:
    return AppShape(deps[-1].name, deps)


def test_each_gpu_deployment_gets_the_servers_share_and_cpu_ones_keep_theirs() -> None:
    model = DeploymentShape("Model", 1.0, 1, {"target_ongoing_requests": 3.0, "max_replicas": 9})
    embed = DeploymentShape("Embed", 0.5, 2)
    pre = DeploymentShape("Pre", 0.0, 3)
    api = DeploymentShape("Api", 0.0, 1, {"min_replicas": 1, "max_replicas": 2})
    s = shape(model, embed, pre, api)
    counts = copy_counts(s, 4)  # 1.5 GPUs a step: 2 steps in 4 GPUs
    assert counts == {"Model": 2, "Embed": 2, "Pre": 3, "Api": 2}
    assert gpu_replicas(s, counts) == 4 and app_target(s) == 3.0
    assert copy_counts(s, 2)["Api"] == 1  # one step; the CPU ingress follows it
    with pytest.raises(InputError, match="'replicas_per_server'"):
        copy_counts(s, 1)  # 1.5 GPUs needed
    note = deploy_note("svc", s, counts, 3.0, own_target=False)
    assert "Model x2 (1 GPU each)" in note and "from autoscaling_config" in note
    assert "\n" not in note
    assert AppShape.from_dict(s.to_dict()) == s


def test_an_app_without_a_gpu_deployment_is_refused() -> None:
    with pytest.raises(InputError, match=r"'import_path'.*no GPU deployment"):
        check_has_gpu(shape(DeploymentShape("Api", 0.0, 1)), "svc")


def test_a_service_files_local_paths_are_read_relative_to_it(tmp_path: Any) -> None:
    """The client's side, before any cluster: a working_dir relative to the file's
    folder, a requirements file read into its list, a missing folder refused by field."""
    from lyra_ray.client.service_files import localized, read_service_file, services_of

    (tmp_path / "app").mkdir()
    (tmp_path / "reqs.txt").write_text("numpy==2.*  # the model's\n\nscipy\n")
    f = tmp_path / "svc.yaml"
    f.write_text(
        "applications:\n- name: a\n  import_path: m:app\n"
        "  runtime_env: {working_dir: app, pip: reqs.txt}\n"
    )
    (svc,) = localized(services_of(read_service_file(f)), tmp_path)
    assert svc["runtime_env"]["working_dir"] == str((tmp_path / "app").resolve())
    assert svc["runtime_env"]["pip"] == ["numpy==2.*", "scipy"]
    assert parse_service_spec(svc).app is not None
    with pytest.raises(InputError, match=r"'runtime_env\.working_dir'"):
        localized([{**APP, "runtime_env": {"working_dir": "nowhere"}}], tmp_path)
    with pytest.raises(InputError, match=r"'applications\[0\]\.args'"):
        services_of({"applications": [{**APP, "args": [1]}]})
