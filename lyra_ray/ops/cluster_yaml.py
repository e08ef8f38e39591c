"""cluster.yaml, read once for everything that starts a cluster from it.

Why one reader: the file is Ray's cluster-launcher config, and three things derive from
it that must not drift apart: the node types lyra asks the autoscaler for (the ``lyra:``
section's ``autoscale``), the fake multi-node provider's config that plays the cluster
on this host (:mod:`lyra_ray.ops.autoscaling_config`), and the head's and workers' start
commands (:mod:`lyra_ray.ops.host_cluster`). Each reads the file through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import read_text_input, safe_load_yaml

CLUSTER_KEYS = ("available_node_types", "head_node_type", "max_workers")
"""What the ``lyra:`` section's ``autoscale.cluster`` carries from the file."""


def load_cluster_yaml(path: str | Path) -> dict[str, Any]:
    """The parsed file; an InputError naming it when it is no mapping."""
    doc = safe_load_yaml(read_text_input(path, "config"), str(path))
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping (a Ray cluster config)")
    return doc


def with_node_types(section: Mapping[str, Any], doc: Mapping[str, Any]) -> dict[str, Any]:
    """``section`` (a ``lyra:`` section) with the file's node types under
    ``autoscale.cluster``, when it has an ``autoscale`` block that does not name them."""
    out = dict(section)
    auto = out.get("autoscale")
    if isinstance(auto, Mapping) and "cluster" not in auto and "available_node_types" in doc:
        out["autoscale"] = {**auto, "cluster": {k: doc[k] for k in CLUSTER_KEYS if k in doc}}
    return out
