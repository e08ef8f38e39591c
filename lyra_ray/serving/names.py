"""The Serve application names and routes of a service, shared by the pool and the ingresses.

Pure (no Ray): the serving pool names the applications it deploys and deletes with these,
and lyra's ingress finds a server's copy of a user's application by them.
"""

from __future__ import annotations

from lyra_ray.serving.app_spec import INTERNAL_PREFIX


def ingress_app_name(service: str) -> str:
    return f"lyra-{service}"


def backend_app_name(service: str, node_id: str) -> str:
    """The Serve application of ``service`` on server ``node_id`` (a copy, or MoE devices)."""
    return f"lyra-{service}--{node_id[:12]}"


def copy_route(service: str, node_id: str) -> str:
    """The internal route prefix of ``service``'s copy on ``node_id``."""
    return f"{INTERNAL_PREFIX}/{service}/{node_id[:12]}"
