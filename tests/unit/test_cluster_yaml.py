"""cluster.yaml deploys: Ray's own cluster-config schema accepts it, each node type
declares the GPUs its instance really has, lyra's section parses, the image is pinned."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lyra_ray.ops.local import lyra_section
from lyra_ray.runtime.config import SchedulerConfig

ROOT = Path(__file__).resolve().parents[2]

AWS_GPUS: dict[str, tuple[str, int]] = {
    "p4d.24xlarge": ("A100", 8),
    "p3.2xlarge": ("V100", 1),
    "p3.8xlarge": ("V100", 4),
    "p3.16xlarge": ("V100", 8),
    "p2.xlarge": ("K80", 1),
    "p2.8xlarge": ("K80", 8),
    "p2.16xlarge": ("K80", 16),
    "g4dn.xlarge": ("T4", 1),
    "g4dn.12xlarge": ("T4", 4),
    "g5.12xlarge": ("A10G", 4),
}
"""AWS instance -> (accelerator, count), from AWS's accelerated-computing instance pages."""


@pytest.fixture(scope="module")
def config() -> dict[str, object]:
    doc = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_rays_schema_accepts_it(config: dict[str, object]) -> None:
    pytest.importorskip("jsonschema")
    from ray.autoscaler._private.util import prepare_config, validate_config

    # what `ray up` does: fill in the defaults, then validate against ray-schema.json
    validate_config(prepare_config(dict(config)))  # a ValidationError names the field
    import jsonschema

    with pytest.raises(jsonschema.ValidationError, match="lyra"):  # the check can fail
        validate_config(prepare_config({**config, "lyra": {"policy": "fifo"}}))


def test_each_node_type_declares_its_instances_gpus(config: dict[str, object]) -> None:
    types = config["available_node_types"]
    assert isinstance(types, dict)
    for name, t in types.items():
        instance = t["node_config"]["InstanceType"]
        declared = t["resources"].get("GPU", 0)
        if declared == 0:
            assert not instance.startswith(("p", "g")), (name, instance)
            continue
        accel, count = AWS_GPUS[instance]
        assert declared == count, f"{name}: declares {declared} GPUs, {instance} has {count}"
        assert t["resources"].get(f"accelerator_type:{accel}") == 1, (name, accel)
        assert t["labels"]["gpu-type"] == accel.lower(), name
        assert t["labels"]["pool"] in ("training", "inference"), name


def test_it_ships_the_project_pins_the_image_and_parses_for_lyra(
    config: dict[str, object],
) -> None:
    assert config["file_mounts"] == {"~/lyra-ray": "."}
    image = config["docker"]["image"]  # type: ignore[index]
    assert image.startswith("rayproject/ray:2.60.") and "latest" not in image
    assert any("pip install" in c and "lyra-ray" in c for c in config["setup_commands"])  # type: ignore[union-attr]
    cfg = SchedulerConfig.from_dict(lyra_section(str(ROOT / "cluster.yaml")))
    assert cfg.storage_path.startswith("s3://")  # shared by every node, read via pyarrow.fs
