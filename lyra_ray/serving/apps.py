"""The Ray Serve side of an inference service: one ingress, one backend app per server.

Why one backend application per inference server: lending a server to training must
take exactly *that* server's replicas away, without touching the replicas elsewhere
and without dropping a request. Serve's own scaling picks which replicas go, and
``serve.run`` with a new replica count restarts them all; a per-server application
(replicas pinned to the server by its ``ray.io/node-id`` label) can be drained and
deleted on its own, and deployed again when the server comes back.

The ingress holds the HTTP route. It sends each request to the serving server with the
fewest requests in flight per replica, counts what is in flight per server, and stops
sending new requests to a server the moment lyra starts draining it; lyra deletes the
server's backend only once its count is zero, so no request is ever cut off. With no
server taking requests (never the case while the service keeps its floor of one) a
request waits briefly for one, then gets a 503 rather than hanging.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ray import serve

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.serving.meter import RequestMeter
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)

WAIT_FOR_BACKEND_S = 10.0


def ingress_app_name(service: str) -> str:
    return f"lyra-{service}"


def backend_app_name(service: str, node_id: str) -> str:
    return f"lyra-{service}--{node_id[:12]}"


@serve.deployment(max_ongoing_requests=100_000, ray_actor_options={"num_cpus": 0})
class ServiceIngress:
    """Routes a service's requests over the backends of its serving servers."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.handles: dict[str, Any] = {}
        """node id -> the handle of that server's backend app."""
        self.replicas: dict[str, int] = {}
        self.routing: set[str] = set()
        self.inflight: dict[str, int] = {}
        self.meter = RequestMeter()

    def set_backends(self, backends: dict[str, list[Any]]) -> list[str]:
        """``{node id: [backend app, replicas]}`` take new requests; every other server
        stops taking them at once (its requests in flight finish). Returns the routing set."""
        for node, (app, replicas) in backends.items():
            if node not in self.handles:
                self.handles[node] = serve.get_app_handle(app)
            self.replicas[node] = max(1, int(replicas))
            self.inflight.setdefault(node, 0)
        self.routing = set(backends)
        return sorted(self.routing)

    def inflight_on(self, node: str) -> int:
        """Requests still running on ``node``'s backend (what a drain waits for)."""
        return self.inflight.get(node, 0)

    def forget(self, node: str) -> None:
        """Drop a drained server's handle (its backend app is being deleted)."""
        if node not in self.routing and not self.inflight.get(node):
            self.handles.pop(node, None)
            self.inflight.pop(node, None)

    def stats(self) -> dict[str, Any]:
        """The meter's counters and average, and where requests go now."""
        return {
            **self.meter.stats(),
            "routing": sorted(self.routing),
            "inflight": dict(self.inflight),
        }

    def _pick(self, avoid: str | None = None) -> str | None:
        nodes = sorted(self.routing - {avoid}) or sorted(self.routing)
        if not nodes:
            return None
        return min(nodes, key=lambda n: self.inflight.get(n, 0) / self.replicas[n])

    async def _wait_pick(self, avoid: str | None = None) -> str:
        node = self._pick(avoid)
        deadline = time.monotonic() + WAIT_FOR_BACKEND_S
        while node is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            node = self._pick(avoid)
        if node is None:
            raise NoBackend(self.service)
        return node

    async def _send(self, node: str, body: Any) -> Any:
        self.inflight[node] = self.inflight.get(node, 0) + 1
        try:
            return await self.handles[node].remote(body)
        finally:
            self.inflight[node] -= 1

    async def handle(self, body: Any) -> Any:
        """Send ``body`` to a serving server. WHY one retry: a replica process or its
        server that dies mid-request (a crash, a lost node) loses only that attempt; the
        request is idempotent, so it goes once more, to another server if one serves."""
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import DeploymentUnavailableError, ReplicaUnavailableError

        gone = (RayActorError, ReplicaUnavailableError, DeploymentUnavailableError)
        try:
            node = await self._wait_pick()
        except NoBackend:
            self.meter.reject()
            raise
        self.meter.begin()
        ok = False
        try:
            try:
                out = await self._send(node, body)
            except gone:
                log.warning(
                    "%s: the backend on %s went mid-request: sent again", self.service, node
                )
                out = await self._send(await self._wait_pick(avoid=node), body)
            ok = True
        finally:
            self.meter.end(ok)
        return out

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        raw = await request.body()
        body: Any = {}
        if raw:
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse({"error": "body: not JSON"}, status_code=400)
        try:
            return await self.handle(body)
        except NoBackend:
            return JSONResponse({"error": f"service {self.service}: no server"}, status_code=503)


class NoBackend(RuntimeError):
    """No server of the service takes requests (only while a whole pool is down)."""


@serve.deployment(max_ongoing_requests=8)
class DenseReplica:
    """A small dense torch model (an MLP) on one (fake) GPU.

    ``service_ms`` of sleep after the forward pass stands for the GPU time of a real
    model, which the CPU-only hosts here cannot give; with it, load and latency behave
    as on a server whose replicas each serve a few requests at a time.
    """

    def __init__(self, hidden: int, layers: int, service_ms: float, node_id: str) -> None:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        mods: list[Any] = []
        for _ in range(layers):
            mods += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
        self.model = torch.nn.Sequential(*mods, torch.nn.Linear(hidden, 1)).eval()
        self.hidden = hidden
        self.service_s = service_ms / 1000.0
        self.node_id = node_id

    async def __call__(self, body: Any) -> dict[str, Any]:
        import torch

        rows = body.get("inputs") if isinstance(body, dict) else None
        if rows is None:
            x = torch.ones(1, self.hidden)
        else:
            x = torch.tensor(rows, dtype=torch.float32).reshape(-1, self.hidden)
        with torch.no_grad():
            y = self.model(x)
        if self.service_s > 0:
            await asyncio.sleep(self.service_s)
        return {"outputs": y.squeeze(-1).tolist(), "node": self.node_id}


def dense_backend(node_id: str, replicas: int, config: dict[str, Any]) -> Any:
    """The bound backend application of a dense service on one server."""
    return DenseReplica.options(  # type: ignore[attr-defined]
        name="replica",
        num_replicas=replicas,
        ray_actor_options={
            "num_gpus": 1,
            "num_cpus": 0,
            "label_selector": {NODE_ID_LABEL: node_id},
        },
    ).bind(
        int(config.get("hidden", 64)),
        int(config.get("layers", 2)),
        float(config.get("service_ms", 50.0)),
        node_id,
    )


def ingress(service: str) -> Any:
    return ServiceIngress.options(name="ingress").bind(service)  # type: ignore[attr-defined]


def ingress_of(spec: ServiceSpec) -> Any:
    """The bound ingress application of ``spec``, by its model."""
    if spec.model == "moe":
        from lyra_ray.serving.moe_app import moe_ingress

        return moe_ingress(spec.name, dict(spec.config))
    return ingress(spec.name)


def backend_of(spec: ServiceSpec, node_id: str, replicas: int) -> Any:
    """The bound backend application of ``spec`` on one server (``replicas`` GPUs)."""
    if spec.model == "moe":
        from lyra_ray.serving.moe_app import moe_backend

        return moe_backend(node_id, replicas, dict(spec.config))
    return dense_backend(node_id, replicas, dict(spec.config))
