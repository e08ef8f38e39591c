"""The live serving side: inference services on the inference pool, lent and reclaimed.

The scheduler owns every inference service (:mod:`lyra_ray.serving.apps` says how one
is laid out on Serve: per server, a copy of a user's application, or lyra's MoE
devices). This module carries out the core's loaning actions on them and tells the core
how many servers serving needs:

- ``Lend(node)``: the server is *draining*: the ingresses stop sending it requests at
  once, and once nothing is in flight there (streams included) its applications are
  deleted; then it is *lent* and training may start on it (:meth:`node_ready`).
- ``Reclaim(node)``: the server is *reclaiming*: once no training run holds it any more
  its applications are deployed again (:mod:`lyra_ray.runtime.service_copies`), and
  once they run the ingresses route to it and it is *serving*. The time from the demand
  rise to that moment is the reclaim latency. Replicas on the other servers are never
  touched: each server's application is deployed and deleted on its own.
- Demand: each poll samples every ingress (time-averaged requests in flight), feeds
  each service's :class:`~lyra_ray.serving.demand.DemandEstimator`, and reports a
  :class:`~lyra_ray.model.ServingDemand` when the number of servers needed changes.

Every server hosts every service (its share of the server's GPUs), so the pool's
demand is the largest of the services' demands. A user's application enters routing
on a server only once its copy there runs. Nothing here decides what to lend: that is
the policy's, through the core.
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
from lyra_ray.runtime.job_env import UriKeeper
from lyra_ray.runtime.pool_demand import PoolDemand
from lyra_ray.runtime.service_copies import CopyDeployer, deploy_unblocked
from lyra_ray.serving import apps
from lyra_ray.serving.capacity import check_fits, check_route, replicas_on
from lyra_ray.serving.copy_plan import AppShape, copy_counts, deploy_note, gpu_replicas
from lyra_ray.serving.restore import restore_services
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)

SERVING, DRAINING, LENT, RECLAIMING = "serving", "draining", "lent", "reclaiming"
CALL_TIMEOUT_S = 30.0
RETRY_DEPLOY_S = 15.0
"""A copy whose deploy failed is deployed again this long after (not every poll)."""


def _result(response: Any) -> Any:
    return response.result(timeout_s=CALL_TIMEOUT_S)


def _running(status: Mapping[str, Any], name: str) -> bool:
    app = status.get(name)
    return app is not None and str(app.status).endswith("RUNNING")


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
        self.shapes: dict[str, AppShape] = {}
        """Per user service: its application's shape, as importing it found."""
        self.copies = CopyDeployer()
        self.keeper = UriKeeper()
        """Keeps the services' uploaded code in the GCS while they live."""
        self._status: Mapping[str, Any] = {}
        """``serve.status().applications`` as this poll read it."""
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
        self._routed: dict[str, set[str]] = {}
        """Per service: the servers its ingress was last told."""
        self._reroute = False
        """An ingress could not be told its servers (still starting): retry next poll."""
        self.dropped: dict[str, str] = {}
        """Saved services a restart did not deploy again, with the line saying why."""

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        return {
            "services": {k: s.to_dict() for k, s in sorted(self.services.items())},
            "shapes": {k: s.to_dict() for k, s in sorted(self.shapes.items())},
            **self.demand.to_state(),
            "state": dict(sorted(self.state.items())),
            "reclaims": self.reclaims[-1000:],
            "lends": self.lends[-1000:],
        }

    def load_state(self, saved: Mapping[str, Any]) -> None:
        """Resume a saved serving state. Each saved service is deployed again, or dropped
        with one line saying why (:mod:`lyra_ray.serving.restore`: its uploaded code is
        gone with an old cluster's GCS); ``dropped`` keeps those lines for ``ping``. A
        kept service whose ingress Serve does not run (a new cluster) gets it deployed
        again here; its copies follow as servers serve (:meth:`_serving_step`, and
        :meth:`node_events` for the new cluster's servers)."""
        from lyra_ray.runtime.job_env import missing_packages

        restored = restore_services(saved, missing_packages)
        self.services, self.shapes = restored.services, restored.shapes
        self.dropped = restored.dropped
        for line in restored.dropped.values():
            log.warning("%s", line)
        self.state = dict(saved.get("state", {}))
        self.demand.load_state(saved)
        self.reclaims = list(saved.get("reclaims", []))
        self.lends = list(saved.get("lends", []))
        self._resize_demand(saved.get("estimators", {}))
        if self.services:
            self._start_serve()
            self._keep_ingresses(serve.status().applications)

    def _keep_ingresses(self, status: Mapping[str, Any]) -> None:
        """Deploy again every service's ingress that Serve does not run: a new cluster
        under an old state, or one deleted behind the scheduler's back (a restarted
        scheduler may read it while Serve still lists it as deleting; once it is gone,
        the next poll puts it back)."""
        for spec in self.services.values():
            name = apps.ingress_app_name(spec.name)
            if name not in status:
                log.info("service %s: its ingress deployed again", spec.name)
                deploy_unblocked(apps.ingress_of(spec, self.upstream()), name, spec.http_route)

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
                    self.copies.delete(name, e.node_id)
        if changed and self.services:
            self._resize_demand()

    def node_ready(self, node: str) -> bool:
        """Whether training may use ``node``: a training server, or a lent one whose
        replicas have left."""
        return node not in self.nodes or self.state.get(node) == LENT

    # ------------------------------------------------------------------ services

    def _counts(self, spec: ServiceSpec, node: m.Node, services: int = 0) -> dict[str, int]:
        """Replicas per deployment of ``spec``'s application on ``node`` (MoE: its GPUs)."""
        gpus = replicas_on(spec, node, services or len(self.services))
        if spec.model == "moe":
            return {"gpus": gpus}
        return copy_counts(self.shapes[spec.name], gpus, spec.name, node.id)

    def _replicas(self, spec: ServiceSpec, node: m.Node) -> int:
        """GPU replicas of ``spec`` on ``node``: what its requests in flight are per."""
        if spec.model == "moe":
            return replicas_on(spec, node, len(self.services))
        try:
            return gpu_replicas(self.shapes[spec.name], self._counts(spec, node))
        except InputError:  # a server joined since the deploy, too small for a copy
            return 1

    def check(
        self, spec: ServiceSpec, shape: AppShape | None, batch: Sequence[ServiceSpec] = ()
    ) -> None:
        """Refuse ``spec`` if the pool cannot host it beside the services it has and the
        ``batch`` deployed with it (InputError names the field); changes nothing."""
        if claims_page_route(spec.http_route):
            raise InputError(f"field 'route': {spec.http_route!r} is the operator page's route")
        others = {**self.services, **{b.name: b for b in batch if b.name != spec.name}}
        check_fits(spec, others, self.nodes)
        check_route(spec, self._foreign_routes())
        total = len(others) + 1
        for node in self.nodes.values():
            if shape is not None:
                copy_counts(shape, replicas_on(spec, node, total), spec.name, node.id)
            for s in self.services.values():  # every service's share shrinks by one more
                if s.model == "app":
                    self._counts(s, node, total)

    def _foreign_routes(self) -> dict[str, str]:
        """Routes of Serve applications on the cluster that are not lyra's (Serve's
        proxy lists them at ``/-/routes``); {} while Serve is not running."""
        if not self._serve_started:
            return {}
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.upstream()}/-/routes", timeout=5) as r:
                routes = json.loads(r.read() or b"{}")
        except Exception:  # Serve's proxy busy: the services' own routes are still checked
            log.warning("cannot read Serve's routes", exc_info=True)
            return {}
        return {
            str(route): f"Serve application {app!r}"
            for route, app in routes.items()
            if not str(app).startswith("lyra-")
        }

    def upstream(self) -> str:
        """Serve's proxy as an ingress replica on the head reaches it."""
        host = self.http_host if self.http_host not in ("0.0.0.0", "", "::") else "127.0.0.1"
        return f"http://{host}:{self.http_port}"

    def deploy(
        self, spec: ServiceSpec, shape: AppShape | None = None, own_target: bool = True
    ) -> tuple[str, str]:
        """Deploy ``spec`` on every serving server; returns its HTTP URL and the one line
        that says what each server's copy runs (``own_target``: the service set its
        target itself, else it came from an ``autoscaling_config``). The operator's page
        (:mod:`lyra_ray.page`) is a Serve app on the same proxy but never a service here:
        it is deployed apart, counts in no demand, and its route is refused."""
        self._start_serve()
        self.check(spec, shape)
        self.services[spec.name] = spec
        if shape is not None:
            self.shapes[spec.name] = shape
        serving = sum(1 for st in self.state.values() if st in (SERVING, RECLAIMING))
        self._resize_demand(start={spec.name: serving})
        for node, st in sorted(self.state.items()):
            if st == SERVING:  # lent and draining servers get it when they come back
                self._deploy_backend(spec, node)
        deploy_unblocked(
            apps.ingress_of(spec, self.upstream()),
            apps.ingress_app_name(spec.name),
            spec.http_route,
        )
        self._route()
        note = ""
        if shape is not None and self.nodes:
            smallest = min(self.nodes.values(), key=lambda n: n.num_gpus)
            note = deploy_note(
                spec.name,
                shape,
                self._counts(spec, smallest),
                spec.target_ongoing_per_replica,
                own_target,
            )
            log.info("%s", note)
        return self.url(spec.name), note

    def remove(self, name: str) -> None:
        spec = self.services.pop(name, None)
        if spec is None:
            raise InputError(f"field 'service': unknown service {name!r}")
        self.demand.forget(name)
        self.shapes.pop(name, None)
        serve.delete(apps.ingress_app_name(name), _blocking=False)
        for node in self.state:
            self.copies.delete(name, node)
        self.copies.forget(name)

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
        if not self.copies.may_deploy(spec.name, node, RETRY_DEPLOY_S):
            return
        try:
            counts = self._counts(spec, self.nodes[node])
        except InputError as e:  # a server joined since the deploy, too small for a copy
            self.copies.failed(spec.name, node, str(e))
            return
        self.copies.deploy(spec, self.shapes.get(spec.name), node, counts)

    def _deploy_backends(self, node: str) -> None:
        for spec in self.services.values():
            self._deploy_backend(spec, node)

    def _ingress(self, name: str) -> Any:
        return serve.get_app_handle(apps.ingress_app_name(name))

    def _targets(self, name: str) -> dict[str, list[Any]]:
        """The servers ``name``'s ingress should send requests to, with their GPU
        replicas: the serving ones (for a user's application: whose copy runs)."""
        spec = self.services[name]
        out: dict[str, list[Any]] = {}
        for node, st in sorted(self.state.items()):
            if st != SERVING or node not in self.nodes:
                continue
            app = apps.backend_app_name(name, node)
            if spec.model == "app" and not _running(self._status, app):
                continue
            out[node] = [app, self._replicas(spec, self.nodes[node])]
        return out

    def _route(self) -> None:
        """Tell every ingress which servers take new requests."""
        if any(s.model == "app" for s in self.services.values()):
            self._status = serve.status().applications
        for name in self.services:
            backends = self._targets(name)
            try:
                _result(self._ingress(name).set_backends.remote(backends))
            except Exception:  # the ingress may still be starting: the next poll retries
                log.info("ingress of %s not ready yet", name, exc_info=True)
                self._reroute = True
                return
            self._routed[name] = set(backends)
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
        return any(
            apps.backend_app_name(s, node) in names or self.copies.busy(s, node)
            for s in self.services
        )

    # ------------------------------------------------------------------ poll

    reports_progress: ClassVar[bool] = False

    def collect(self, now: float, earlier: Sequence[m.Event], progress: bool) -> list[m.Event]:
        """As the loop's source: follow the nodes the executor saw come and go
        (``earlier``), then :meth:`poll`."""
        self.node_events(list(earlier))
        return self.poll(now)

    def poll(self, now: float) -> list[m.Event]:
        """Advance drains and reclaims; report the demand when it changes."""
        self.copies.reap()
        status = serve.status().applications if self.services else {}
        self._status = status
        self.keeper.keep(s.app.runtime_env for s in self.services.values() if s.app)
        self._keep_ingresses(status)
        for node, st in sorted(self.state.items()):
            if st == DRAINING:
                self._drain_step(node, status)
            elif st == RECLAIMING:
                self._reclaim_step(node, status, now)
            elif st == SERVING and node in self.nodes:
                self._serving_step(node, status)
        if self._reroute or any(
            set(self._targets(n)) != self._routed.get(n) for n in self.services
        ):
            self._route()
        return self.demand.sample(now, self._stats)

    def _serving_step(self, node: str, status: Mapping[str, Any]) -> None:
        """A serving server whose copy of a user's application is missing (its deploy
        failed, or Serve lost it) gets it deployed again."""
        for name, spec in self.services.items():
            app = apps.backend_app_name(name, node)
            if spec.model == "app" and app not in status and not self.copies.busy(name, node):
                self._deploy_backend(spec, node)

    def _drain_step(self, node: str, status: Mapping[str, Any]) -> None:
        names = [apps.backend_app_name(s, node) for s in self.services]
        if node not in self.deleting:
            if any(self.copies.busy(s, node) for s in self.services):
                return  # a copy still being deployed: delete it once it has landed
            busy = sum(_result(self._ingress(s).inflight_on.remote(node)) for s in self.services)
            if busy:
                return
            for s in self.services:
                self.copies.delete(s, node)
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
                if name not in status and not self.copies.busy(s, node):
                    self._deploy_backend(self.services[s], node)
            return
        if not all(_running(status, name) for name in names.values()):
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
        expected = set(self._targets(name))
        if set(got.get("routing", expected)) != expected:
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
            shape = self.shapes.get(name)
            gpu_names = {d.name for d in shape.gpu_deployments} if shape is not None else set()
            for node, st in self.state.items():
                app = status.get(apps.backend_app_name(name, node))
                if app is None:
                    continue
                for dep_name, d in app.deployments.items():
                    if spec.model == "app" and dep_name not in gpu_names:
                        continue  # a user's copy: its GPU replicas are the service's
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
                    **(
                        {"import_path": spec.app.import_path, "ingress": shape.ingress}
                        if spec.app is not None and shape is not None
                        else {}
                    ),
                    "failures": {
                        n[:12]: why
                        for (s, n), (_, why) in self.copies.failures.items()
                        if s == name
                    },
                }
            )
        return {
            "demand_servers": self.demand.level or 0,
            "services": services,
            "servers": dict(sorted(self.state.items())),
            "reclaims": self.reclaims[-50:],
            "lends": self.lends[-50:],
        }
