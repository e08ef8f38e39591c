"""The live serving side: inference services on the inference pool, lent and reclaimed.

The scheduler owns every inference service (:mod:`lyra_ray.serving.apps` says how one
is laid out on Serve: per server, a copy of a user's application, or lyra's MoE
devices). This module carries out the core's loaning actions on them and tells the core
how many servers serving needs:

- ``Lend(node)`` and ``Reclaim(node)`` move the server through its loan states
  (:mod:`lyra_ray.runtime.server_loans`); here they are carried out on Serve: a
  draining server's ingresses stop sending it requests at once and its applications are
  deleted once nothing is in flight there (streams included); a reclaimed server's
  applications are deployed again once no training run holds it
  (:mod:`lyra_ray.runtime.service_copies`), and routed to once they run. Replicas on
  the other servers are never touched.
- Demand: each poll samples every ingress (time-averaged requests in flight), feeds
  each service's :class:`~lyra_ray.serving.demand.DemandEstimator`, and reports a
  :class:`~lyra_ray.model.ServingDemand` when the number of servers needed changes.

Every server hosts every service (its share of the server's GPUs), so the pool's
demand is the largest of the services' demands. Nothing here decides what to lend:
that is the policy's, through the core.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ray import serve

from lyra_ray import model as m
from lyra_ray.model.errors import InputError
from lyra_ray.runtime.ingress_routes import IngressRoutes
from lyra_ray.runtime.job_env import UriKeeper
from lyra_ray.runtime.pool_demand import PoolDemand
from lyra_ray.runtime.serve_proxy import ServeProxy
from lyra_ray.runtime.server_loans import DRAINING, RECLAIMING, SERVING, ServerLoans
from lyra_ray.runtime.service_copies import CopyDeployer, deploy_unblocked
from lyra_ray.runtime.serving_views import describe_pool
from lyra_ray.serving import apps
from lyra_ray.serving.capacity import check_joins, counts_on, gpu_replicas_on
from lyra_ray.serving.copy_plan import AppShape, deploy_note
from lyra_ray.serving.restore import restore_services
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)

RETRY_DEPLOY_S = 15.0
"""A copy whose deploy failed is deployed again this long after (not every poll)."""


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
        self.proxy = ServeProxy(http_host, http_port)
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
        self.loans = ServerLoans()
        self.routes = IngressRoutes()
        self.dropped: dict[str, str] = {}
        """Saved services a restart did not deploy again, with the line saying why."""

    @property
    def state(self) -> dict[str, str]:
        """Each server's loan state (owned by :attr:`loans`)."""
        return self.loans.state

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        return {
            "services": {k: s.to_dict() for k, s in sorted(self.services.items())},
            "shapes": {k: s.to_dict() for k, s in sorted(self.shapes.items())},
            **self.demand.to_state(),
            **self.loans.to_state(),
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
        self.loans.load_state(saved)
        self.demand.load_state(saved)
        self._resize_demand()
        if self.services:
            self.proxy.start()
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
                deploy_unblocked(
                    apps.ingress_of(spec, self.proxy.upstream()), name, spec.http_route
                )

    # ------------------------------------------------------------------ nodes

    def node_events(self, events: list[m.Event]) -> None:
        """Follow the inventory: new inference servers start out serving."""
        changed = False
        for e in events:
            if isinstance(e, m.NodeUp) and e.node.pool == "inference":
                changed = True
                self.nodes[e.node.id] = e.node
                # a new server starts serving (a restart knows its own)
                if self.loans.joined(e.node.id) and self.services:
                    self._deploy_backends(e.node.id)
                    self._route()
            elif isinstance(e, m.NodeDown) and e.node_id in self.nodes:
                changed = True
                del self.nodes[e.node_id]
                self.loans.left(e.node_id)
                self._route()
                for name, spec in self.services.items():
                    if spec.model == "app":  # what was in flight there never ends
                        self.routes.lost(name, e.node_id)
                    self.copies.delete(name, e.node_id)  # else Serve retries its replicas forever
        if changed and self.services:
            self._resize_demand()

    def node_ready(self, node: str) -> bool:
        """Whether training may use ``node``: a training server, or a lent one whose
        replicas have left."""
        return node not in self.nodes or self.loans.is_lent(node)

    # ------------------------------------------------------------------ services

    def _counts(self, spec: ServiceSpec, node: m.Node) -> dict[str, int]:
        return counts_on(spec, self.shapes.get(spec.name), node, len(self.services))

    def _replicas(self, spec: ServiceSpec, node: m.Node) -> int:
        return gpu_replicas_on(spec, self.shapes.get(spec.name), node, len(self.services))

    def check(
        self, spec: ServiceSpec, shape: AppShape | None, batch: Sequence[ServiceSpec] = ()
    ) -> None:
        """Refuse ``spec`` if the pool cannot host it beside the services it has and the
        ``batch`` deployed with it (InputError names the field); changes nothing."""
        others = {**self.services, **{b.name: b for b in batch if b.name != spec.name}}
        check_joins(spec, shape, others, self.shapes, self.nodes, self.proxy.foreign_routes())

    def deploy(
        self, spec: ServiceSpec, shape: AppShape | None = None, own_target: bool = True
    ) -> tuple[str, str]:
        """Deploy ``spec`` on every serving server; returns its HTTP URL and the one line
        that says what each server's copy runs (``own_target``: the service set its
        target itself, else it came from an ``autoscaling_config``). The operator's page
        (:mod:`lyra_ray.page`) is a Serve app on the same proxy but never a service here:
        it is deployed apart, counts in no demand, and its route is refused."""
        self.proxy.start()
        self.check(spec, shape)
        self.services[spec.name] = spec
        if shape is not None:
            self.shapes[spec.name] = shape
        self._resize_demand(start={spec.name: self.loans.taking_requests()})
        for node, st in sorted(self.state.items()):
            if st == SERVING:  # lent and draining servers get it when they come back
                self._deploy_backend(spec, node)
        deploy_unblocked(
            apps.ingress_of(spec, self.proxy.upstream()),
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
        self.routes.removed(name)

    def url(self, name: str) -> str:
        return self.proxy.url(self.services[name].http_route)

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
        self.routes.tell({name: self._targets(name) for name in self.services})

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
            if self.loans.lend(node, now, lambda: self._backends_exist(node)):
                self._route()
        elif isinstance(action, m.Reclaim):
            if self.loans.reclaim(action.node_id, now):
                self._route()
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
        if self.routes.stale({n: self._targets(n) for n in self.services}):
            self._route()
        return self.demand.sample(now, self.routes.stats_reader(lambda n: set(self._targets(n))))

    def _serving_step(self, node: str, status: Mapping[str, Any]) -> None:
        """A serving server whose copy of a service is missing gets it deployed again:
        its deploy failed, Serve lost it, or the service was deployed while the server
        drained and a reclaim cut that drain short (the server serves again at once, but
        the new service's copy went only to the servers serving then)."""
        for name, spec in self.services.items():
            app = apps.backend_app_name(name, node)
            if app not in status and not self.copies.busy(name, node):
                self._deploy_backend(spec, node)

    def _drain_step(self, node: str, status: Mapping[str, Any]) -> None:
        names = [apps.backend_app_name(s, node) for s in self.services]
        if node not in self.loans.deleting:
            if any(self.copies.busy(s, node) for s in self.services):
                return  # a copy still being deployed: delete it once it has landed
            if any(self.routes.may_route_to(s, node) for s in self.services):
                return  # an ingress has not confirmed it sends nothing new there
            if self.routes.inflight_on(self.services, node) != 0:
                return  # requests still run there, or an ingress has not said yet
            for s in self.services:
                self.copies.delete(s, node)
            self.loans.deleting_copies(node)
        if not any(name in status for name in names):
            for s in self.services:
                self.routes.forget(s, node)
            self.loans.drained(node)

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
        if not self.loans.reclaimed(node, now, self.demand.rise_at):
            self.demand.rise_at = None
        self._route()

    # ------------------------------------------------------------------ status

    def metrics_view(self) -> dict[str, Any]:
        """What :class:`~lyra_ray.runtime.metrics.SchedulerMetrics` reads each cycle."""
        return {
            "servers": self.state,
            "reclaims": self.loans.reclaims,
            "stats": [
                {"name": k, **v}
                for k, v in sorted(self.demand.last_stats.items())
                if k in self.services
            ],
        }

    @property
    def last_status(self) -> Mapping[str, Any]:
        """``serve.status().applications`` as the last poll read it."""
        return self._status

    def describe(self) -> dict[str, Any]:
        """What ``lyra status`` and the operator's page show of serving (no remote call:
        see :mod:`lyra_ray.runtime.serving_views`)."""
        return describe_pool(self)
