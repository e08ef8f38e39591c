"""Whether a service fits the inference pool, and how many replicas it gets per server.

Pure: the serving pool (:mod:`lyra_ray.runtime.serving`) asks before it deploys
anything, so a service that cannot be hosted is refused whole, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.serving.app_spec import routes_clash
from lyra_ray.serving.spec import ServiceSpec, moe_knobs

LIVE_MODELS = ("app", "moe")
"""Service kinds the live runtime can deploy today."""


def check_route(spec: ServiceSpec, taken: Mapping[str, str]) -> None:
    """Refuse a route another service or application holds (``taken``: route prefix ->
    who holds it); lyra's internal prefix is refused when the spec is parsed."""
    route = spec.http_route
    for other, who in sorted(taken.items()):
        if routes_clash(route, other):
            raise InputError(
                f"service {spec.name!r}: field 'route': {route} is taken by {who} ({other})"
            )


def replicas_on(spec: ServiceSpec, node: Node, services: int) -> int:
    """Replicas of ``spec`` on ``node``: its own count, else an even share of the GPUs
    among the ``services`` every server hosts."""
    return spec.replicas_per_server or max(1, node.num_gpus // max(1, services))


def check_fits(
    spec: ServiceSpec, services: Mapping[str, ServiceSpec], nodes: Mapping[str, Node]
) -> None:
    """Refuse a service the pool cannot host beside ``services`` (InputError names the field)."""
    name = spec.name
    if spec.model not in LIVE_MODELS:
        raise InputError(f"service {name!r}: field 'model': {spec.model!r} cannot run live yet")
    if name in services:
        raise InputError(f"service {name!r}: field 'name': already deployed")
    check_route(spec, {s.http_route: f"service {s.name!r}" for s in services.values()})
    if not nodes:
        raise InputError(f"service {name!r}: the cluster has no inference-pool server")
    if spec.min_servers > len(nodes):
        raise InputError(
            f"service {name!r}: field 'min_servers': {spec.min_servers} > the "
            f"{len(nodes)} inference servers"
        )
    need = (spec.replicas_per_server or 1) + sum(
        s.replicas_per_server or 1 for s in services.values()
    )
    for n in nodes.values():
        if need > n.num_gpus:
            raise InputError(
                f"service {name!r}: field 'replicas_per_server': server {n.id[:12]} "
                f"has {n.num_gpus} GPUs, too few for one more service's replicas"
            )
    if spec.model == "moe":
        knobs = moe_knobs(spec.config)
        for n in nodes.values():
            # any one server may be the last one serving: it must hold every expert
            slots = replicas_on(spec, n, len(services) + 1) * int(knobs["slots"])
            if slots < knobs["experts"]:
                raise InputError(
                    f"service {name!r}: field 'config.slots': server {n.id[:12]} would hold "
                    f"{slots} expert replicas per layer, fewer than the {knobs['experts']} "
                    "experts of a layer"
                )
