"""The live serving side: inference services on the inference pool, lent and reclaimed.

The scheduler owns every inference service (:mod:`lyra_ray.serving.apps` says how one
is laid out on Serve). This module carries out the core's loaning actions on them and
tells the core how many servers serving needs:

- ``Lend(node)``: the server is *draining*: the ingresses stop sending it requests at
  once, and once nothing is in flight there its backend apps are deleted; then it is
  *lent* and training may start on it (:meth:`node_ready`).
- ``Reclaim(node)``: the server is *reclaiming*: once no training run holds it any more
  its backend apps are deployed again, and once they run the ingresses route to it and
  it is *serving*. The time from the demand rise to that moment is the reclaim latency.
- Demand: each poll samples every ingress (time-averaged requests in flight), feeds
  each service's :class:`~lyra_ray.serving.demand.DemandEstimator`, and reports a
  :class:`~lyra_ray.model.ServingDemand` when the number of servers needed changes.

Every server hosts every service (``replicas_per_server`` replicas each, one GPU per
replica), so the pool's demand is the largest of the services' demands. Nothing here
decides what to lend: that is the policy's, through the core.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ray import serve

from lyra_ray import model as m
from lyra_ray.contract.page import claims_page_route
from lyra_ray.model.errors import InputError
from lyra_ray.runtime.pool_demand import PoolDemand
from lyra_ray.serving import apps
from lyra_ray.serving.capacity import check_fits, replicas_on
from lyra_ray.serving.spec import ServiceSpec, parse_service_spec

log = logging.getLogger(__name__)

SERVING, DRAINING, LENT, RECLAIMING = "serving", "draining", "lent", "reclaiming"
CALL_TIMEOUT_S = 30.0


def _result(response: Any) -> Any:
    return response.result(timeout_s=CALL_TIMEOUT_S)


def _deploy(app: Any, name: str, route: str | None) -> None:
    """Deploy without waiting for the replicas (the scheduler loop must not stall)."""
    from ray.serve.api import _run

    _run(app, _blocking=False, name=name, route_prefix=route)


class ServingPool:
    def __init__(
        self,
        node_held: Callable[[str], bool],
        http_host: str = "127.0.0.1",
        http_port: int = 8000,
    ) -> None:
        """``node_held(node)`` says whether a training run still holds GPUs there."""
        self.node_held = node_held
        self.http_host, self.http_port = http_host, http_port
        self.services: dict[str, ServiceSpec] = {}
        self.demand = PoolDemand()
        self.nodes: dict[str, m.Node] = {}
        """The inference servers, as the inventory reports them."""
        self.state: dict[str, str] = {}
        self.deleting: set[str] = set()
        """Draining servers whose backend apps are being deleted."""
        self.reclaim_started: dict[str, float] = {}
        self.reclaims: list[dict[str, Any]] = []
        """Per finished reclaim: the server, its latency from the demand rise, and from
        the Reclaim action."""
        self.lends: list[dict[str, Any]] = []
        self._serve_started = False
        self._reroute = False
        """An ingress could not be told its servers (still starting): retry next poll."""

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        return {
            "services": {k: s.to_dict() for k, s in sorted(self.services.items())},
            **self.demand.to_state(),
            "state": dict(sorted(self.state.items())),
            "reclaims": self.reclaims[-1000:],
            "lends": self.lends[-1000:],
        }

    def load_state(self, saved: Mapping[str, Any]) -> None:
        self.services = {k: parse_service_spec(v) for k, v in saved.get("services", {}).items()}
        self.state = dict(saved.get("state", {}))
        self.demand.load_state(saved)
        self.reclaims = list(saved.get("reclaims", []))
        self.lends = list(saved.get("lends", []))
        self._resize_demand(saved.get("estimators", {}))
        if self.services:
            self._start_serve()

    # ------------------------------------------------------------------ nodes

    def node_events(self, events: list[m.Event]) -> None:
        """Follow the inventory: new inference servers start out serving."""
        changed = False
        for e in events:
            if isinstance(e, m.NodeUp) and e.node.pool == "inference":
                changed = True
                self.nodes[e.node.id] = e.node
                if e.node.id not in self.state:  # a new server (a restart knows its own)
                    self.state[e.node.id] = SERVING
                    if self.services:
                        self._deploy_backends(e.node.id)
                        self._route()
            elif isinstance(e, m.NodeDown) and e.node_id in self.nodes:
                changed = True
                del self.nodes[e.node_id]
                self.state.pop(e.node_id, None)
                self._route()
                for name in self.services:  # else Serve retries its replicas forever
                    serve.delete(apps.backend_app_name(name, e.node_id), _blocking=False)
        if changed and self.services:
            self._resize_demand()

    def node_ready(self, node: str) -> bool:
        """Whether training may use ``node``: a training server, or a lent one whose
        replicas have left."""
        return node not in self.nodes or self.state.get(node) == LENT

    # ------------------------------------------------------------------ services

    def _replicas(self, spec: ServiceSpec, node: m.Node) -> int:
        return replicas_on(spec, node, len(self.services))

    def deploy(self, spec: ServiceSpec) -> str:
        """Deploy ``spec`` on every serving server; returns its HTTP URL. The operator's
        page (:mod:`lyra_ray.page`) is a Serve app on the same proxy but never a service
        here: it is deployed apart, counts in no demand, and its route is refused."""
        if claims_page_route(spec.http_route):
            raise InputError(f"field 'route': {spec.http_route!r} is the operator page's route")
        check_fits(spec, self.services, self.nodes)
        self._start_serve()
        self.services[spec.name] = spec
        serving = sum(1 for st in self.state.values() if st in (SERVING, RECLAIMING))
        self._resize_demand(start={spec.name: serving})
        for node, st in sorted(self.state.items()):
            if st == SERVING:  # lent and draining servers get it when they come back
                self._deploy_backend(spec, node)
        _deploy(apps.ingress_of(spec), apps.ingress_app_name(spec.name), spec.http_route)
        self._route()
        return self.url(spec.name)

    def remove(self, name: str) -> None:
        spec = self.services.pop(name, None)
        if spec is None:
            raise InputError(f"field 'service': unknown service {name!r}")
        self.demand.forget(name)
        serve.delete(apps.ingress_app_name(name), _blocking=False)
        for node in self.state:
            serve.delete(apps.backend_app_name(name, node), _blocking=False)

    def url(self, name: str) -> str:
        return f"http://{self.http_host}:{self.http_port}{self.services[name].http_route}"

    def _start_serve(self) -> None:
        """Start Serve's HTTP proxy, or adopt the one already running (a restarted
        scheduler, or Serve started by someone else): its host and port are the truth."""
        if self._serve_started:
            return
        serve.start(http_options={"host": self.http_host, "port": self.http_port})
        try:
            from ray.serve.context import _get_global_client

            client = _get_global_client()
            if client is not None:
                http = client.http_config
                self.http_host, self.http_port = str(http.host), int(http.port)
        except Exception:  # private API gone: keep the configured address
            log.warning("cannot read Serve's HTTP address; assuming the configured one")
        self._serve_started = True

    def _deploy_backend(self, spec: ServiceSpec, node: str) -> None:
        n = self.nodes[node]
        app = apps.backend_of(spec, node, self._replicas(spec, n))
        _deploy(app, apps.backend_app_name(spec.name, node), None)

    def _deploy_backends(self, node: str) -> None:
        for spec in self.services.values():
            self._deploy_backend(spec, node)

    def _ingress(self, name: str) -> Any:
        return serve.get_app_handle(apps.ingress_app_name(name))

    def _route(self) -> None:
        """Tell every ingress which servers take new requests: the serving ones."""
        for name, spec in self.services.items():
            backends = {
                node: [apps.backend_app_name(name, node), self._replicas(spec, self.nodes[node])]
                for node, st in self.state.items()
                if st == SERVING and node in self.nodes
            }
            try:
                _result(self._ingress(name).set_backends.remote(backends))
            except Exception:  # the ingress may still be starting: the next poll retries
                log.info("ingress of %s not ready yet", name, exc_info=True)
                self._reroute = True
                return
        self._reroute = False

    def _resize_demand(
        self, saved: Mapping[str, Any] | None = None, start: Mapping[str, int] | None = None
    ) -> None:
        """The demand side sized to the services and servers now (see
        :meth:`PoolDemand.resize`): a service's replicas per server on its smallest one."""
        self.demand.resize(
            self.services,
            len(self.nodes),
            lambda spec: min((self._replicas(spec, n) for n in self.nodes.values()), default=1),
            saved,
            start,
        )

    # ------------------------------------------------------------------ actions

    def apply(self, actions: Sequence[m.Action]) -> None:
        """As the loop's sink: carry out the Lend, Reclaim and ScaleServe actions (the
        executor carries out the rest)."""
        for a in actions:
            if isinstance(a, m.Lend | m.Reclaim | m.ScaleServe):
                self._apply(a)

    def _apply(self, action: m.Action) -> None:
        now = time.time()
        if isinstance(action, m.Lend):
            node = action.node_id
            prev = self.state.get(node)
            if prev == RECLAIMING and not self._backends_exist(node):
                self.state[node] = LENT  # its replicas never came back
            elif prev in (SERVING, RECLAIMING):
                self.state[node] = DRAINING
                self.lends.append({"node": node, "at": now})
                self._route()
            log.info("lend %s: %s -> %s", node[:12], prev, self.state.get(node))
        elif isinstance(action, m.Reclaim):
            node = action.node_id
            prev = self.state.get(node)
            if prev == DRAINING and node not in self.deleting:
                self.state[node] = SERVING  # still has its replicas: route to it again
                self._route()
            elif prev in (LENT, DRAINING):
                self.state[node] = RECLAIMING
                self.reclaim_started[node] = now
            log.info("reclaim %s: %s -> %s", node[:12], prev, self.state.get(node))
        elif isinstance(action, m.ScaleServe):
            log.info("serving on %d servers", action.replicas)

    def _backends_exist(self, node: str) -> bool:
        names = set(serve.status().applications)
        return any(apps.backend_app_name(s, node) in names for s in self.services)

    # ------------------------------------------------------------------ poll

    reports_progress: ClassVar[bool] = False

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        """As the loop's source: follow the nodes the executor saw come and go
        (``earlier``), then :meth:`poll`."""
        self.node_events(list(earlier))
        return self.poll(now)

    def poll(self, now: float) -> list[m.Event]:
        """Advance drains and reclaims; report the demand when it changes."""
        if self._reroute:
            self._route()
        status = serve.status().applications if self.services else {}
        for node, st in sorted(self.state.items()):
            if st == DRAINING:
                self._drain_step(node, status)
            elif st == RECLAIMING:
                self._reclaim_step(node, status, now)
        return self.demand.sample(now, self._stats)

    def _drain_step(self, node: str, status: Mapping[str, Any]) -> None:
        names = [apps.backend_app_name(s, node) for s in self.services]
        if node not in self.deleting:
            busy = sum(_result(self._ingress(s).inflight_on.remote(node)) for s in self.services)
            if busy:
                return
            for name in names:
                serve.delete(name, _blocking=False)
            self.deleting.add(node)
        if not any(name in status for name in names):
            self.deleting.discard(node)
            for s in self.services:
                self._ingress(s).forget.remote(node)
            self.state[node] = LENT
            log.info("server %s drained: lent", node[:12])

    def _reclaim_step(self, node: str, status: Mapping[str, Any], now: float) -> None:
        names = {s: apps.backend_app_name(s, node) for s in self.services}
        if any(name not in status for name in names.values()):
            if self.node_held(node):
                return  # training is still leaving the server
            for s, name in names.items():
                if name not in status:
                    self._deploy_backend(self.services[s], node)
            return
        if not all(str(status[name].status).endswith("RUNNING") for name in names.values()):
            return
        self.state[node] = SERVING
        self._route()
        began = self.reclaim_started.pop(node, now)
        rise = self.demand.rise_at if self.demand.rise_at is not None else began
        self.reclaims.append(
            {
                "node": node,
                "at": now,
                "latency_s": now - min(rise, began),
                "since_action_s": now - began,
            }
        )
        if not any(st == RECLAIMING for st in self.state.values()):
            self.demand.rise_at = None
        log.info("server %s serving again (%.1f s after the demand rose)", node[:12], now - rise)

    def _stats(self, name: str) -> Mapping[str, Any] | None:
        """A service's ingress counters, None while the ingress still starts. An ingress
        that routes to other servers than the serving ones (Serve restarted it after a
        crash: it knows none) is told them again at the next poll."""
        try:
            got = dict(_result(self._ingress(name).stats.remote()))
        except Exception:
            return None
        serving = {n for n, st in self.state.items() if st == SERVING and n in self.nodes}
        if set(got.get("routing", serving)) != serving:
            self._reroute = True
        return got

    # ------------------------------------------------------------------ status

    def _plan(self, name: str) -> dict[str, Any]:
        """A MoE service's expert plan, as its ingress holds it ({} while it starts)."""
        try:
            return dict(_result(self._ingress(name).plan.remote()))
        except Exception:
            return {}

    def metrics_view(self) -> dict[str, Any]:
        """What :class:`~lyra_ray.runtime.metrics.SchedulerMetrics` reads each cycle."""
        return {
            "servers": self.state,
            "reclaims": self.reclaims,
            "stats": [
                {"name": k, **v}
                for k, v in sorted(self.demand.last_stats.items())
                if k in self.services
            ],
        }

    def describe(self) -> dict[str, Any]:
        status = serve.status().applications if self.services else {}
        services = []
        for name, spec in sorted(self.services.items()):
            replicas = ready = 0
            for node, st in self.state.items():
                app = status.get(apps.backend_app_name(name, node))
                if app is None:
                    continue
                for d in app.deployments.values():
                    states = {str(k).split(".")[-1]: int(v) for k, v in d.replica_states.items()}
                    replicas += sum(states.values())
                    ready += states.get("RUNNING", 0) if st == SERVING else 0
            services.append(
                {
                    "name": name,
                    "model": spec.model,
                    "url": self.url(name),
                    "replicas": replicas,
                    "ready": ready,
                    "demand_servers": self.demand.of(name),
                    "counters": {  # the ingress's last counters, for the operator's page
                        k: v
                        for k, v in self.demand.last_stats.get(name, {}).items()
                        if k in ("completed", "failed", "ongoing_avg", "ongoing")
                    },
                    **({"plan": self._plan(name)} if spec.model == "moe" else {}),
                }
            )
        return {
            "demand_servers": self.demand.level or 0,
            "services": services,
            "servers": dict(sorted(self.state.items())),
            "reclaims": self.reclaims[-50:],
            "lends": self.lends[-50:],
        }
