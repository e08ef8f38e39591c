"""The fake provider's config is derived from cluster.yaml and cannot drift from it; the
head's start commands are the file's own, changed only in ports and paths."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from lyra_ray.model.errors import InputError
from lyra_ray.model.node_types import parse_node_types
from lyra_ray.ops.autoscaling_config import (
    FAKE_HEAD_TYPE,
    HostFit,
    fake_provider_config,
    head_type,
    localize,
)
from lyra_ray.ops.cluster_yaml import load_cluster_yaml, with_node_types
from lyra_ray.ops.host_cluster import HostCluster
from lyra_ray.ops.local import lyra_section
from lyra_ray.runtime.config import SchedulerConfig

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "cluster.yaml"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return load_cluster_yaml(FILE)


def derived(doc: dict[str, Any], fit: HostFit) -> dict[str, Any]:
    return fake_provider_config(localize(doc, fit), "127.0.0.1:45555", 100 * 2**20)


def test_every_worker_type_is_the_files_own(doc: dict[str, Any]) -> None:
    cfg = derived(doc, HostFit())
    head = head_type(doc)
    workers = {k: v for k, v in doc["available_node_types"].items() if k != head}
    assert set(cfg["available_node_types"]) == {*workers, FAKE_HEAD_TYPE}
    for name, spec in workers.items():
        got = cfg["available_node_types"][name]
        assert got["labels"] == spec["labels"], name
        assert got["min_workers"] == spec["min_workers"], name
        assert got["max_workers"] == spec["max_workers"], name
        extra = {"CPU", "object_store_memory"}  # what the host adds, named in HostFit
        assert {k: v for k, v in got["resources"].items() if k not in extra} == spec["resources"]
    assert cfg["max_workers"] == doc["max_workers"]
    assert cfg["provider"]["type"] == "fake_multinode"
    assert cfg["provider"]["gcs_address"] == "127.0.0.1:45555"  # never the default 6379


def test_lyra_asks_for_the_node_types_the_autoscaler_can_start(doc: dict[str, Any]) -> None:
    """The same node types, read from the file (what lyra asks for) and from the derived
    config (what the autoscaler starts): no drift, also with the host's GPU cap."""
    for fit in (HostFit(), HostFit(max_gpus_per_node=1)):
        cfg = derived(doc, fit)
        from_file = parse_node_types(
            localize(doc, fit)["available_node_types"], head=head_type(doc)
        )
        from_config = parse_node_types(cfg["available_node_types"], head=FAKE_HEAD_TYPE)
        assert [
            (t.name, t.gpu_type, t.gpus, t.pool, t.min_workers, t.max_workers) for t in from_file
        ] == [
            (t.name, t.gpu_type, t.gpus, t.pool, t.min_workers, t.max_workers) for t in from_config
        ]
    capped = parse_node_types(
        derived(doc, HostFit(max_gpus_per_node=1))["available_node_types"], head=FAKE_HEAD_TYPE
    )
    assert {t.gpus for t in capped} == {1}


def test_rays_schema_accepts_the_derived_config(doc: dict[str, Any]) -> None:
    pytest.importorskip("jsonschema")
    from ray.autoscaler._private.util import validate_config

    # complete as written: prepare_config would look for the example.yaml the wheel lacks
    validate_config(derived(doc, HostFit(max_gpus_per_node=1, node_types=("a100",))))


def test_a_subset_and_the_idle_timeout_are_host_choices(doc: dict[str, Any]) -> None:
    cfg = derived(doc, HostFit(node_types=("a100",), idle_timeout_minutes=0.1))
    assert set(cfg["available_node_types"]) == {"a100", FAKE_HEAD_TYPE}
    assert cfg["idle_timeout_minutes"] == 0.1
    with pytest.raises(InputError, match="nope"):
        localize(doc, HostFit(node_types=("nope",)))
    bad = {**doc, "head_node_type": "missing"}
    with pytest.raises(InputError, match="head_node_type"):
        localize(bad, HostFit())


def test_the_lyra_section_carries_the_files_node_types(doc: dict[str, Any]) -> None:
    section = lyra_section(str(FILE))
    assert section["autoscale"]["cluster"]["available_node_types"] == doc["available_node_types"]
    s = SchedulerConfig.from_dict(section).autoscale_settings()
    assert s.enabled and {t.name for t in s.node_types} == {"a100", "v100", "k80", "t4-inference"}
    assert all(t.usd_per_hour > 0 and "list price" in t.price_source for t in s.node_types)
    assert with_node_types({"policy": "fifo"}, doc) == {"policy": "fifo"}  # no autoscale: as is
    own = {"autoscale": {"enabled": False, "cluster": {"max_workers": 1}}}
    assert with_node_types(own, doc) == own  # a section naming its own node types keeps them


def _host(tmp_path: Path, doc: dict[str, Any], autoscaler: bool) -> HostCluster:
    fit = HostFit(lyra={"state_dir": str(tmp_path / "s")})
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(localize(doc, fit)))
    return HostCluster(str(tmp_path), str(config), 45001, 45002, autoscaler, "ns", "disabled", 1)


def test_the_heads_commands_are_the_files_with_this_hosts_ports(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    hc = _host(tmp_path, doc, True)
    ray_start, lyra_up = hc._head_commands(str(tmp_path / "fake.yaml"))
    assert Path(ray_start[0]).name == "ray" and ray_start[1:3] == ["start", "--head"]
    assert "--port=45001" in ray_start and "--port=6379" not in ray_start
    assert f"--autoscaling-config={tmp_path / 'fake.yaml'}" in ray_start
    assert "--labels=pool=head" in ray_start and "--include-dashboard=true" in ray_start
    assert "--num-cpus=0" in ray_start  # the head type's resources, as flags
    assert Path(lyra_up[0]).name == "lyra" and lyra_up[1] == "up"
    assert lyra_up[-2:] == ["--config", hc.config]
    plain = hc._head_commands(None)[0]
    assert not any(w.startswith("--autoscaling-config") for w in plain)


def test_a_head_command_this_host_cannot_run_is_refused(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    d = copy.deepcopy(doc)
    d["head_start_ray_commands"] = [*d["head_start_ray_commands"], "sudo rm -rf /"]
    hc = _host(tmp_path, d, False)
    with pytest.raises(InputError, match=r"head_start_ray_commands\[2\]"):
        hc._head_commands(None)
    d["head_start_ray_commands"] = ["lyra up --config x"]
    with pytest.raises(InputError, match="no `ray start`"):
        _host(tmp_path, d, False)._head_commands(None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--max-gpus-per-node", "0"], "--max-gpus-per-node"),
        (["up", "--idle-timeout-minutes", "nan"], "--idle-timeout-minutes"),
        (["up", "--types", "nope"], "nope"),
        (["kill-head"], "no fake cluster"),
    ],
)
def test_lyra_fake_cluster_refuses_bad_input_before_starting_anything(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from lyra_ray.cli.main import main

    extra = ["--config", str(FILE)] if args[0] == "up" else []
    assert main(["fake-cluster", *args, *extra, "--dir", str(tmp_path / "d")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d" / "host.json").exists()
