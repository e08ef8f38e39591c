"""The Ray Serve side of an inference service: one ingress, one application per server.

Why one application per inference server: lending a server to training must take exactly
*that* server's replicas away, without touching the replicas elsewhere and without
dropping a request. Serve's own scaling picks which replicas go, and ``serve.run`` with
a new replica count restarts them all; a per-server application (replicas pinned to the
server by its ``ray.io/node-id`` label) can be drained and deleted on its own, and
deployed again when the server comes back.

- A user's service (``model: app``): each serving server runs a *copy* of the user's
  whole application (:mod:`lyra_ray.serving.app_build`) at an internal route prefix,
  :func:`copy_route`; the ingress is lyra's reverse proxy on the public route
  (:mod:`lyra_ray.serving.proxy`).
- lyra's MoE service (``model: moe``): per server, one device deployment per GPU; its
  own ingress plans experts over them (:mod:`lyra_ray.serving.moe_app`).

Either ingress sends each request to the serving server with the fewest requests in
flight per GPU replica, counts what is in flight per server, and stops sending new
requests to a server the moment lyra starts draining it; lyra deletes the server's
application only once its count is zero, so no request is ever cut off.
"""

from __future__ import annotations

from typing import Any

from lyra_ray.serving.names import backend_app_name, copy_route, ingress_app_name
from lyra_ray.serving.spec import ServiceSpec

__all__ = ["backend_app_name", "backend_of", "copy_route", "ingress_app_name", "ingress_of"]


def ingress_of(spec: ServiceSpec, upstream: str) -> Any:
    """The bound ingress application of ``spec``; ``upstream``: Serve's proxy, as the
    ingress replica reaches it (a user's app is forwarded to through it)."""
    if spec.model == "moe":
        from lyra_ray.serving.moe_app import moe_ingress

        return moe_ingress(spec.name, dict(spec.config))
    from lyra_ray.serving.proxy import AppIngress

    env = dict(spec.app.runtime_env) if spec.app is not None else {}
    opts: dict[str, Any] = {"num_cpus": 0, "resources": {"node:__internal_head__": 0.001}}
    if env:
        opts["runtime_env"] = env
    return AppIngress.options(name="ingress", ray_actor_options=opts).bind(  # type: ignore[attr-defined]
        spec.name, upstream
    )


def backend_of(spec: ServiceSpec, node_id: str, replicas: int) -> Any:
    """The bound backend application of lyra's MoE service on one server."""
    from lyra_ray.serving.moe_device import moe_backend

    return moe_backend(node_id, replicas, dict(spec.config))
