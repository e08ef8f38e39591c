"""Applying replica plans to the running Serve app, and the periodic re-plan loop.

WHY the external scaler: ``serve.run(app.options(num_replicas=k))`` redeploys and restarts
every replica; the dashboard's scale endpoint (enabled by ``external_scaler_enabled=True``)
only changes a deployment's target, so replicas of experts whose count stays or grows keep
running and keep their warm state.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ray import serve

from lyra_ray.moe_serving.app import APP_NAME, INGRESS_NAME, expert_name
from lyra_ray.moe_serving.planner import Placement, replan

log = logging.getLogger(__name__)


def _auth_headers() -> dict[str, str]:
    try:
        from ray._private.authentication.http_token_authentication import (
            get_auth_headers_if_auth_enabled,
        )

        return dict(get_auth_headers_if_auth_enabled({}))
    except Exception:  # auth helpers missing or no token: talk without a header
        return {}


def scale_deployment(
    dashboard_url: str, deployment: str, replicas: int, app: str = APP_NAME
) -> None:
    """POST the target replica count of one deployment to the dashboard's scale endpoint."""
    url = f"{dashboard_url.rstrip('/')}/api/v1/applications/{app}/deployments/{deployment}/scale"
    body = json.dumps({"target_num_replicas": int(replicas)}).encode()
    headers = {"Content-Type": "application/json", **_auth_headers()}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        if resp.status != 200:
            raise RuntimeError(f"scale {deployment} -> {replicas}: HTTP {resp.status}")


def running_replicas(app: str = APP_NAME) -> dict[str, int]:
    """RUNNING replicas per deployment of ``app``."""
    st = serve.status().applications[app].deployments
    # ReplicaState is a str-Enum: the plain string key finds it
    return {name: int(d.replica_states.get("RUNNING", 0)) for name, d in st.items()}  # type: ignore[call-overload]


def wait_for_counts(
    counts: npt.NDArray[np.int64], app: str = APP_NAME, timeout_s: float = 120.0
) -> None:
    """Block until every expert deployment runs exactly its target number of replicas."""
    want = {
        expert_name(layer, e): int(counts[layer, e])
        for layer in range(counts.shape[0])
        for e in range(counts.shape[1])
    }
    deadline = time.monotonic() + timeout_s
    while True:
        have = running_replicas(app)
        if all(have.get(k) == v for k, v in want.items()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"replica counts not reached in {timeout_s}s: {have}")
        time.sleep(0.5)


def apply_counts(
    dashboard_url: str,
    old: npt.NDArray[np.int64],
    new: npt.NDArray[np.int64],
    app: str = APP_NAME,
    wait: bool = True,
) -> list[str]:
    """Scale the deployments whose counts changed; tell the ingress the new split counts.

    Order matters: the replica budget fills the GPU slots, so scale-downs go first (the
    ingress first splits over ``min(old, new)`` so it never waits on a leaving replica), then
    scale-ups into the freed slots, then the ingress adopts the new counts.
    """
    ingress = serve.get_deployment_handle(INGRESS_NAME, app)
    changed = [(int(i), int(e)) for i, e in zip(*np.nonzero(old != new), strict=True)]
    downs = [(i, e) for i, e in changed if new[i, e] < old[i, e]]
    ups = [(i, e) for i, e in changed if new[i, e] > old[i, e]]
    if downs:
        ingress.set_counts.remote(np.minimum(old, new).tolist()).result()
        for i, e in downs:
            scale_deployment(dashboard_url, expert_name(i, e), int(new[i, e]), app)
        if wait:
            wait_for_counts(np.minimum(old, new), app)
    for i, e in ups:
        scale_deployment(dashboard_url, expert_name(i, e), int(new[i, e]), app)
    if wait and ups:
        wait_for_counts(new, app)
    ingress.set_counts.remote(new.tolist()).result()
    return [expert_name(i, e) for i, e in downs + ups]


@dataclass
class Replanner:
    """Phase 2 on the live app: read actual loads, re-plan deviating layers, apply counts."""

    placement: Placement
    dashboard_url: str
    threshold: float = 0.2
    app: str = APP_NAME
    history: list[dict[str, object]] = field(default_factory=list)

    def step(self) -> list[int]:
        """One re-plan round; returns the layers that were re-planned."""
        handle = serve.get_deployment_handle(INGRESS_NAME, self.app)
        actual = np.asarray(handle.take_window.remote().result(), dtype=np.float64)
        if actual.sum() == 0:
            return []
        new, layers = replan(self.placement, actual, self.threshold)
        if layers:
            changed = apply_counts(self.dashboard_url, self.placement.counts, new.counts, self.app)
            log.info("re-planned layers %s; scaled %s", layers, changed)
            self.history.append({"layers": layers, "scaled": changed})
        self.placement = new
        return layers
