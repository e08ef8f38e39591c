"""Whether a service fits the inference pool, and how many replicas it gets per server.

Pure: the serving pool (:mod:`lyra_ray.runtime.serving`) asks before it deploys
anything, so a service that cannot be hosted is refused whole, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray.contract.page import claims_page_route
from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.serving.app_spec import routes_clash
from lyra_ray.serving.copy_plan import AppShape, copy_counts, gpu_replicas
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


def counts_on(
    spec: ServiceSpec, shape: AppShape | None, node: Node, services: int
) -> dict[str, int]:
    """Replicas per deployment of ``spec``'s application on ``node`` when every server
    hosts ``services`` services (MoE: its GPUs). InputError when a copy does not fit."""
    gpus = replicas_on(spec, node, services)
    if spec.model == "moe":
        return {"gpus": gpus}
    if shape is None:
        raise InputError(f"service {spec.name!r}: its application's shape is not known")
    return copy_counts(shape, gpus, spec.name, node.id)


def gpu_replicas_on(spec: ServiceSpec, shape: AppShape | None, node: Node, services: int) -> int:
    """GPU replicas of ``spec`` on ``node``: what its requests in flight are counted per.
    A server too small for a copy (it joined after the deploy) counts as one."""
    if spec.model == "moe":
        return replicas_on(spec, node, services)
    if shape is None:  # not imported yet: the ingress counts it as one
        return 1
    try:
        return gpu_replicas(shape, counts_on(spec, shape, node, services))
    except InputError:
        return 1


def check_joins(
    spec: ServiceSpec,
    shape: AppShape | None,
    services: Mapping[str, ServiceSpec],
    shapes: Mapping[str, AppShape],
    nodes: Mapping[str, Node],
    taken: Mapping[str, str],
) -> None:
    """Refuse ``spec`` unless the pool can host it beside ``services`` (those deployed and
    those deployed in the same batch): it fits every server, its route is free of
    ``taken`` (other Serve applications' routes) and of the operator page's, and every
    user's copy, its own and the others' (each share shrinks by one more service),
    still fits every server. InputError names the field; changes nothing."""
    if claims_page_route(spec.http_route):
        raise InputError(f"field 'route': {spec.http_route!r} is the operator page's route")
    check_fits(spec, services, nodes)
    check_route(spec, taken)
    total = len(services) + 1
    for node in nodes.values():
        if shape is not None:
            copy_counts(shape, replicas_on(spec, node, total), spec.name, node.id)
        for s in services.values():
            if s.model == "app" and s.name in shapes:
                counts_on(s, shapes[s.name], node, total)
