"""What ``lyra status`` and the operator's page show of the serving pool.

Reads :class:`~lyra_ray.runtime.serving.ServingPool` and Serve; owns nothing. Apart
from the pool because it is the one place that counts replicas the way a person reads
them (a user's copy counts its GPU deployments only) and asks each MoE ingress for its
plan: neither is needed to lend or reclaim a server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray import serve

from lyra_ray.runtime.server_loans import SERVING
from lyra_ray.serving import apps

if TYPE_CHECKING:
    from lyra_ray.runtime.serving import ServingPool

RECENT = 50
"""Lends and reclaims shown: the page's history table, not the whole saved record."""


def _replica_counts(pool: ServingPool, name: str, status: Any) -> tuple[int, int]:
    """A service's replicas over all servers, and those ready on serving ones. For a
    user's copy, only its GPU deployments count: they are the service's replicas."""
    spec, shape = pool.services[name], pool.shapes.get(name)
    gpu_names = {d.name for d in shape.gpu_deployments} if shape is not None else set()
    replicas = ready = 0
    for node, st in pool.state.items():
        app = status.get(apps.backend_app_name(name, node))
        if app is None:
            continue
        for dep_name, d in app.deployments.items():
            if spec.model == "app" and dep_name not in gpu_names:
                continue
            states = {str(k).split(".")[-1]: int(v) for k, v in d.replica_states.items()}
            replicas += sum(states.values())
            ready += states.get("RUNNING", 0) if st == SERVING else 0
    return replicas, ready


def describe_pool(pool: ServingPool) -> dict[str, Any]:
    status = serve.status().applications if pool.services else {}
    services = []
    for name, spec in sorted(pool.services.items()):
        replicas, ready = _replica_counts(pool, name, status)
        shape = pool.shapes.get(name)
        services.append(
            {
                "name": name,
                "model": spec.model,
                "url": pool.url(name),
                "replicas": replicas,
                "ready": ready,
                "demand_servers": pool.demand.of(name),
                "counters": {  # the ingress's last counters, for the operator's page
                    k: v
                    for k, v in pool.demand.last_stats.get(name, {}).items()
                    if k in ("completed", "failed", "ongoing_avg", "ongoing")
                },
                **({"plan": pool.routes.plan(name)} if spec.model == "moe" else {}),
                **(
                    {"import_path": spec.app.import_path, "ingress": shape.ingress}
                    if spec.app is not None and shape is not None
                    else {}
                ),
                "failures": {
                    n[:12]: why for (s, n), (_, why) in pool.copies.failures.items() if s == name
                },
            }
        )
    return {
        "demand_servers": pool.demand.level or 0,
        "services": services,
        "servers": dict(sorted(pool.state.items())),
        "reclaims": pool.loans.reclaims[-RECENT:],
        "lends": pool.loans.lends[-RECENT:],
    }
