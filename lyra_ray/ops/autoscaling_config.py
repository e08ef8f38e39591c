"""cluster.yaml played on this host: the fake multi-node provider's autoscaling config,
derived from the file's node types so that the two cannot drift.

Ray 2.60 ships a fake node provider (``autoscaler/_private/fake_multi_node``) whose
"nodes" are raylets started inside the head's autoscaler process, each with its node
type's resources and labels; the real autoscaler drives it. It needs a complete config
(the wheel lacks the provider's ``example.yaml``) and the head started as
``RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config=FILE``. This module writes that
config from cluster.yaml's ``available_node_types``: every worker type with its labels,
``min_workers`` and ``max_workers`` and its resources, changed only where :class:`HostFit`
says (each change named there, all of them to fit a small host), the head as the
provider's fixed ``ray.head.default``. ``tests/unit/test_autoscaling_config.py`` checks the
result against the file type by type, and against the node types lyra asks for.

The provider's GCS address defaults to port 6379 (Redis's): it is always given here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.errors import InputError

FAKE_HEAD_TYPE = "ray.head.default"
"""The provider tags its head node with this type, whatever the file calls it."""
_EMPTY = {
    "auth": {},
    "docker": {},
    "initialization_commands": [],
    "setup_commands": [],
    "head_setup_commands": [],
    "worker_setup_commands": [],
    "head_start_ray_commands": [],
    "worker_start_ray_commands": [],
    "file_mounts": {},
    "cluster_synced_files": [],
    "file_mounts_sync_continuously": False,
    "rsync_exclude": [],
    "rsync_filter": [],
}
"""What the provider's config must hold besides the node types: its nodes are started by
the provider itself, so no command or file of the launcher applies."""


@dataclass(frozen=True)
class HostFit:
    """Every way a cluster.yaml's node types change to run on one small host.

    A fake node is a raylet with its agents on this machine and every Train worker a
    process, so a p4d's 8 GPUs would be 8 processes per job; GPUs are capped, CPUs set
    (the file leaves them to the cloud's instance table) and the object store kept
    small. Labels, pools, ``min_workers`` and ``max_workers`` are never changed."""

    max_gpus_per_node: int | None = None
    """Cap each node type's GPU count (None: as the file says)."""
    cpus_per_node: int = 2
    object_store_bytes: int = 100 * 2**20
    node_types: tuple[str, ...] | None = None
    """Keep only these worker types (None: all of them)."""
    idle_timeout_minutes: float | None = None
    """Override the file's ``idle_timeout_minutes`` (a test waits seconds, not minutes)."""
    lyra: Mapping[str, Any] = field(default_factory=dict)
    """Keys of the ``lyra:`` section to set (its state and checkpoint paths on this host)."""


def head_type(doc: Mapping[str, Any]) -> str:
    head = doc.get("head_node_type")
    types = doc.get("available_node_types")
    if not isinstance(types, Mapping) or not isinstance(head, str) or head not in types:
        raise InputError("head_node_type: must name one of available_node_types")
    return head


def host_node_types(doc: Mapping[str, Any], fit: HostFit) -> dict[str, Any]:
    """``available_node_types`` as this host runs them (:class:`HostFit`)."""
    head = head_type(doc)
    types: Mapping[str, Any] = doc["available_node_types"]
    if fit.node_types is not None:
        unknown = sorted(set(fit.node_types) - set(types) - {head})
        if unknown:
            raise InputError(f"node types {unknown}: not in available_node_types {sorted(types)}")
    out: dict[str, Any] = {}
    for name, spec in types.items():
        if name != head and fit.node_types is not None and name not in fit.node_types:
            continue
        t = copy.deepcopy(dict(spec))
        res = dict(t.get("resources") or {})
        if name != head:
            if fit.max_gpus_per_node is not None and res.get("GPU", 0) > fit.max_gpus_per_node:
                res["GPU"] = fit.max_gpus_per_node
            res["CPU"] = fit.cpus_per_node
        t["resources"] = res
        out[name] = t
    return out


def localize(doc: Mapping[str, Any], fit: HostFit) -> dict[str, Any]:
    """The whole file as this host plays it: its node types fitted, its idle timeout and
    ``lyra:`` section (under ``metadata``) changed as ``fit`` says, the rest as it is."""
    out = copy.deepcopy(dict(doc))
    out["available_node_types"] = host_node_types(doc, fit)
    if fit.idle_timeout_minutes is not None:
        out["idle_timeout_minutes"] = fit.idle_timeout_minutes
    if fit.lyra:
        meta = dict(out.get("metadata") or {})
        meta["lyra"] = {**dict(meta.get("lyra") or {}), **dict(fit.lyra)}
        out["metadata"] = meta
    return out


def fake_provider_config(
    doc: Mapping[str, Any], gcs_address: str, object_store: int
) -> dict[str, Any]:
    """The fake provider's complete autoscaling config for a (localized) cluster.yaml."""
    head = head_type(doc)
    types: dict[str, Any] = {}
    for name, spec in doc["available_node_types"].items():
        res = dict(spec.get("resources") or {})
        if name == head:
            types[FAKE_HEAD_TYPE] = {"resources": res, "node_config": {}, "max_workers": 0}
            continue
        res["object_store_memory"] = object_store  # the provider passes it to the raylet
        t: dict[str, Any] = {
            "resources": res,
            "node_config": {},
            "min_workers": int(spec.get("min_workers", 0)),
            "max_workers": int(spec.get("max_workers", doc.get("max_workers", 0))),
        }
        if spec.get("labels"):
            t["labels"] = dict(spec["labels"])
        types[name] = t
    return {
        "cluster_name": doc.get("cluster_name", "lyra"),
        "max_workers": int(doc.get("max_workers", 8)),
        "upscaling_speed": float(doc.get("upscaling_speed", 1.0)),
        "idle_timeout_minutes": float(doc.get("idle_timeout_minutes", 5)),
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "gcs_address": gcs_address,
        },
        "head_node_type": FAKE_HEAD_TYPE,
        "available_node_types": types,
        **copy.deepcopy(_EMPTY),
    }
