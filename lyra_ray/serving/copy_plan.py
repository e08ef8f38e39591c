"""What one server's copy of a user's application runs: replica counts are lyra's.

lyra deploys one copy of the user's whole application per serving server and lends or
reclaims servers whole (:mod:`lyra_ray.serving.app_build`). Serve's autoscaler cannot
run on such a copy: it would pick replicas to add or remove anywhere, and lyra must know
which server's GPUs are free. So each copy runs fixed counts, chosen here from the
application's shape (what importing it found: each deployment's GPUs per replica, its
count, its ``autoscaling_config``) and the GPUs the server gives the service:

- every GPU deployment runs ``k`` replicas, the largest ``k`` whose GPUs fit the
  server's share (a pipeline of GPU stages keeps its stages in step);
- a CPU-only deployment keeps its own ``num_replicas``; one with an
  ``autoscaling_config`` runs ``k`` within its ``min_replicas``..``max_replicas``.

An ``autoscaling_config``'s ``target_ongoing_requests`` becomes the service's target of
requests in flight per GPU replica (unless the service sets its own), which lyra's
demand estimate uses to decide how many servers serve. :func:`deploy_note` says all of
this in one line when the service is deployed.

Pure: no Ray.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lyra_ray.model.errors import InputError

DEFAULT_TARGET = 2.0
"""Serve's own default ``target_ongoing_requests``; lyra's when neither the service nor
the application sets one."""
_EPS = 1e-9


@dataclass(frozen=True)
class DeploymentShape:
    name: str
    num_gpus: float
    num_replicas: int
    """Serve's count for the deployment (1 when the code sets none)."""
    autoscaling: Mapping[str, Any] | None = None
    """Its ``autoscaling_config`` (code and overrides merged), None when it has none."""

    @property
    def gpu(self) -> bool:
        return self.num_gpus > 0


@dataclass(frozen=True)
class AppShape:
    """What importing the application found (``lyra_ray.serving.app_build.describe``)."""

    ingress: str
    deployments: tuple[DeploymentShape, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ingress": self.ingress,
            "deployments": [
                {
                    "name": d.name,
                    "num_gpus": d.num_gpus,
                    "num_replicas": d.num_replicas,
                    "autoscaling": dict(d.autoscaling) if d.autoscaling is not None else None,
                }
                for d in self.deployments
            ],
        }

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> AppShape:
        return AppShape(
            str(raw["ingress"]),
            tuple(
                DeploymentShape(
                    str(d["name"]),
                    float(d["num_gpus"]),
                    int(d["num_replicas"]),
                    dict(d["autoscaling"]) if d.get("autoscaling") is not None else None,
                )
                for d in raw["deployments"]
            ),
        )

    @property
    def gpu_deployments(self) -> tuple[DeploymentShape, ...]:
        return tuple(d for d in self.deployments if d.gpu)

    def gpus_per_step(self) -> float:
        """GPUs one replica of every GPU deployment takes together."""
        return sum(d.num_gpus for d in self.gpu_deployments)


def check_has_gpu(shape: AppShape, service: str) -> None:
    """An application with no GPU deployment has nothing to lend or reclaim."""
    if not shape.gpu_deployments:
        names = [d.name for d in shape.deployments]
        raise InputError(
            f"service {service!r}: field 'import_path': the application has no GPU "
            f"deployment (ray_actor_options.num_gpus > 0) among {names}: lyra lends and "
            "reclaims inference servers by their GPUs"
        )


def gpu_steps(shape: AppShape, gpus: float) -> int:
    """``k``: replicas of each GPU deployment that fit ``gpus`` GPUs (0 if none fit)."""
    per = shape.gpus_per_step()
    return math.floor(gpus / per + _EPS) if per > 0 else 0


def copy_counts(
    shape: AppShape, gpus: float, service: str = "?", server: str = "?"
) -> dict[str, int]:
    """Replicas of each deployment in a copy given ``gpus`` GPUs on its server."""
    k = gpu_steps(shape, gpus)
    if k < 1:
        raise InputError(
            f"service {service!r}: field 'replicas_per_server': server {server[:12]} gives "
            f"this service {gpus:g} GPU(s), one replica of each GPU deployment needs "
            f"{shape.gpus_per_step():g}"
        )
    out: dict[str, int] = {}
    for d in shape.deployments:
        if d.gpu:
            out[d.name] = k
        elif d.autoscaling is not None:
            lo = int(d.autoscaling.get("min_replicas") or 1)
            hi = d.autoscaling.get("max_replicas")
            out[d.name] = max(1, lo, min(k, int(hi)) if hi else k)
        else:
            out[d.name] = d.num_replicas
    return out


def gpu_replicas(shape: AppShape, counts: Mapping[str, int]) -> int:
    """The copy's GPU replicas: what lyra's demand divides its requests in flight by."""
    return sum(counts.get(d.name, 0) for d in shape.gpu_deployments)


def app_target(shape: AppShape) -> float | None:
    """The ``target_ongoing_requests`` of the application's GPU deployments' autoscaling
    configs (the smallest, if they differ), None if none has one."""
    found = [
        float(d.autoscaling["target_ongoing_requests"])
        for d in shape.gpu_deployments
        if d.autoscaling is not None and d.autoscaling.get("target_ongoing_requests")
    ]
    return min(found) if found else None


def deploy_note(
    service: str, shape: AppShape, counts: Mapping[str, int], target: float, own_target: bool
) -> str:
    """The one line lyra says when it deploys: the counts a copy runs and why."""
    runs = ", ".join(
        f"{d.name} x{counts[d.name]}" + (f" ({d.num_gpus:g} GPU each)" if d.gpu else "")
        for d in shape.deployments
    )
    scaled = [d.name for d in shape.deployments if d.autoscaling is not None]
    fixed_gpu = [d.name for d in shape.gpu_deployments if d.autoscaling is None]
    why = f"target {target:g} requests in flight per GPU replica"
    if scaled:
        origin = "the service's own" if own_target else "from autoscaling_config"
        why = (
            f"autoscaling_config of {scaled} is not run by Serve: lyra runs fixed counts "
            f"and lends or reclaims whole servers; {why} ({origin})"
        )
    elif fixed_gpu:
        why = f"GPU replica counts are lyra's (one server's share); {why}"
    return f"service {service!r}: each server's copy runs {runs}; {why}"
