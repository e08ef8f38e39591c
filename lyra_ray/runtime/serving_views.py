"""What ``lyra status`` and the operator's page show of the serving pool.

Reads :class:`~lyra_ray.runtime.serving.ServingPool`; owns nothing. Apart from the pool
because it is the one place that counts replicas the way a person reads them (a user's
copy counts its GPU deployments only) and asks each MoE ingress for its plan: neither is
needed to lend or reclaim a server.

WHY no remote call in :func:`describe_pool`: the scheduler calls it under its lock. It
used to ask Serve's controller for the applications' status and each MoE ingress for its
plan there (the latter with a 30-s timeout), so every ``lyra status``, page refresh or
SDK ``overview()`` held the scheduling loop for two round trips, to actors that answer
late exactly when the host is overloaded: tracing serving faults under a one-core CPU
hog (2026-12-01), Serve's controller found the ingresses answering its health checks
more than 30 s late. The counts now come from the status the pool's own poll read (one
cycle old at most), and the plans, fetched by :func:`moe_plans`, are asked for after
the lock is released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    """The pool as ``lyra status`` shows it, from what the pool holds (no remote call;
    a MoE service's ``plan`` is left to :func:`moe_plans`)."""
    status = pool.last_status
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
                **(
                    {
                        "import_path": spec.app.import_path,
                        "ingress": shape.ingress,
                        # how its copies were deployed: by its warm builder, or by a
                        # task after a builder died (service_copies.py)
                        "copies_deployed": dict(pool.copies.deployed.get(name, {})),
                    }
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


def moe_plans(pool: ServingPool, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each named MoE service's expert plan, as its ingress holds it ({} while it starts).
    Remote calls: not to be made under the scheduler's lock."""
    return {name: pool.routes.plan(name) for name in names}
