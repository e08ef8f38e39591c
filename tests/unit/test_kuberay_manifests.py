"""The KubeRay manifests (deploy/kuberay/) pass KubeRay's own CRD schema, and describe
cluster.yaml's node types.

The schema is the ``openAPIV3Schema`` of KubeRay v1.7.0's CRDs, kept in the repository
(deploy/kuberay/crd/SOURCE.md). Kubernetes itself prunes or refuses unknown fields
(``kubectl apply`` validates strictly); a JSON-Schema validator allows them unless told,
so every object schema that does not preserve unknown fields is closed here
(``additionalProperties: false``) and a misspelt field fails as it would at the API
server. The CEL rules (``x-kubernetes-validations``) are not evaluated.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kuberay"
SHA256 = {
    "rayclusters": "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1",
    "rayjobs": "01a5cf3b17c1769fda44af7e82debcd98722f0c27b9ab84d084681c6649121f5",
}


def _closed(schema: Any) -> Any:
    """``schema`` with every object schema that lists properties closed to others."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    return schema


@cache
def _crd(plural: str) -> dict[str, Any]:
    raw = gzip.decompress((KUBE / "crd" / f"ray.io_{plural}.yaml.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == SHA256[plural], "not the file SOURCE.md names"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # 2.3 MB of YAML: the C parser
    doc: dict[str, Any] = yaml.load(raw, Loader=loader)
    return doc


@cache
def validator(plural: str) -> Any:
    crd = _crd(plural)
    v1 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = _closed(v1["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": "ray.io/v1"}
    schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
    schema["required"] = ["apiVersion", "kind", "metadata", "spec"]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def manifest(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((KUBE / name).read_text())
    return doc


def errors(plural: str, doc: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(plural).iter_errors(doc)
    ]


def test_the_raycluster_passes_kuberays_schema() -> None:
    assert errors("rayclusters", manifest("raycluster.yaml")) == []


def test_the_rayjob_passes_kuberays_schema() -> None:
    assert errors("rayjobs", manifest("rayjob.yaml")) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["spec"].update(workerGroupSpec=[]), "spec"),  # misspelt field
        (lambda d: d["spec"]["workerGroupSpecs"][0].update(maxReplicas="two"), "maxReplicas"),
        (lambda d: d["spec"]["workerGroupSpecs"][0].pop("groupName"), "workerGroupSpecs.0"),
        (lambda d: d["spec"]["gcsFaultToleranceOptions"].update(backend="etcd"), "backend"),
        (lambda d: d["spec"]["workerGroupSpecs"][0]["labels"].update(pool=3), "labels.pool"),
        (lambda d: d.update(kind="RayService"), "kind"),
    ],
)
def test_the_schema_check_can_fail(change: Any, where: str) -> None:
    doc = copy.deepcopy(manifest("raycluster.yaml"))
    change(doc)
    found = errors("rayclusters", doc)
    assert any(where in e for e in found), found


def test_the_worker_groups_are_cluster_yamls_node_types() -> None:
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    types = cluster["available_node_types"]
    head = cluster["head_node_type"]
    spec = manifest("raycluster.yaml")["spec"]
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert set(groups) == set(types) - {head}
    for name, g in groups.items():
        t = types[name]
        assert (g["minReplicas"], g["maxReplicas"]) == (t["min_workers"], t["max_workers"]), name
        assert g["labels"] == t["labels"], name
        gpus = {k: v for k, v in t["resources"].items() if k != "GPU"}
        assert {k: float(v) for k, v in g["resources"].items()} == gpus, name
        container = g["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == t["resources"]["GPU"], name
        instance = g["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"]
        assert instance == t["node_config"]["InstanceType"], name
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] == 60 * cluster["idle_timeout_minutes"]
    head_spec = spec["headGroupSpec"]
    assert head_spec["labels"] == types[head]["labels"]
    assert head_spec["rayStartParams"]["num-cpus"] == str(types[head]["resources"]["CPU"])


def test_the_head_starts_lyra_and_keeps_its_state_outside_the_pod() -> None:
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    spec = manifest("raycluster.yaml")["spec"]
    pod = spec["headGroupSpec"]["template"]["spec"]
    head = pod["containers"][0]
    start = " ".join(head["lifecycle"]["postStart"]["exec"]["command"])
    assert "lyra up --config /home/ray/lyra-config/cluster.yaml" in start
    assert any("lyra up --config" in c for c in cluster["head_start_ray_commands"])
    mounts = {m["name"]: m["mountPath"] for m in head["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["lyra-state"] == cluster["metadata"]["lyra"]["state_dir"]
    assert volumes["lyra-state"]["persistentVolumeClaim"]["claimName"] == "lyra-state"
    assert volumes["lyra-config"]["configMap"]["name"] == "lyra-cluster-yaml"
    ft = spec["gcsFaultToleranceOptions"]
    assert ft["redisAddress"].startswith("redis.") and ft["externalStorageNamespace"]
    others = list(yaml.safe_load_all((KUBE / "redis.yaml").read_text()))
    names = {(d["kind"], d["metadata"]["name"]) for d in others}
    secret = ft["redisPassword"]["valueFrom"]["secretKeyRef"]["name"]
    assert {
        ("Service", "redis"),
        ("Secret", secret),
        ("PersistentVolumeClaim", "lyra-state"),
    } <= names
    job = manifest("rayjob.yaml")["spec"]
    assert (
        job["clusterSelector"]["ray.io/cluster"] == manifest("raycluster.yaml")["metadata"]["name"]
    )
    assert job["entrypoint"].startswith("lyra submit ")
