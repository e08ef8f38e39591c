"""Deploying and deleting one server's Serve application of a service, of either kind.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which decides when (a server
serves, is reclaimed, drained). This knows how, and keeps what is under way:

- a user's application (``model: app``): a copy of the whole application, built and
  deployed by the service's warm builder, an actor with the service's runtime env
  (:class:`~lyra_ray.serving.app_build.CopyBuilder`), since the scheduler never imports
  user code. A service has one builder, started with its first copy and ended with the
  service (or replaced when the service is deployed again with another application).
  A builder that died is dropped and that copy deployed again at once by a fresh task
  (:func:`~lyra_ray.serving.app_build.deploy_copy_task`), the next copy starting a new
  builder. Nothing is waited for (the scheduler's loop must not stall): :meth:`busy`
  says a copy is on its way, :meth:`reap` collects finished deploys and logs a failed
  one (the pool deploys again at its next step);
- lyra's MoE service: its devices, deployed from here as before.

Deleting is the same for both: ``serve.delete`` of the server's application.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray import serve
from ray.exceptions import RayActorError

from lyra_ray.serving import apps
from lyra_ray.serving.app_build import CopyBuilder, deploy_copy_task
from lyra_ray.serving.copy_plan import AppShape
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)

HEAD = {"node:__internal_head__": 0.001}


def deploy_unblocked(app: Any, name: str, route: str | None) -> None:
    """Deploy without waiting for the replicas (the scheduler loop must not stall)."""
    from ray.serve.api import _run

    _run(app, _blocking=False, name=name, route_prefix=route)


@dataclass(frozen=True)
class _Deploy:
    """One copy's deploy under way: its reply's ref, what was asked, and by which
    builder (``None``: a fresh task), so that a builder's death sends it to a task."""

    ref: Any
    spec: ServiceSpec
    args: tuple[Any, ...]
    builder: Any = None


class CopyDeployer:
    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], _Deploy] = {}
        """(service, node) -> the deploy under way."""
        self.failures: dict[tuple[str, str], tuple[float, str]] = {}
        """(service, node) -> when and why its last deploy failed (``describe`` shows it)."""
        self.doomed: dict[tuple[str, str], Any] = {}
        """Deploy tasks under way for applications deleted meanwhile: deleted again once
        the task is done (it may have deployed after the first delete)."""
        self.builders: dict[str, tuple[str, Any]] = {}
        """service -> (its application's source as JSON, its warm builder actor)."""
        self.deployed: dict[str, dict[str, int]] = {}
        """service -> copies deployed ``by_builder`` and ``by_task`` (a builder had died),
        and ``builders_lost``, since this scheduler started (the service's status shows
        it; not saved: what it counts is this process's)."""

    def deploy(
        self, spec: ServiceSpec, shape: AppShape | None, node: str, counts: Mapping[str, int]
    ) -> None:
        """Start deploying ``spec``'s application on ``node`` (``counts``: replicas per
        deployment of a user's copy; for MoE, ``counts["gpus"]`` devices)."""
        name = apps.backend_app_name(spec.name, node)
        if spec.model == "moe":
            deploy_unblocked(apps.backend_of(spec, node, int(counts["gpus"])), name, None)
            return
        assert spec.app is not None and shape is not None
        key = (spec.name, node)
        if key in self.pending:
            return
        args = (name, apps.copy_route(spec.name, node), node, dict(counts))
        builder = self._builder(spec)
        self.pending[key] = _Deploy(builder.deploy.remote(*args), spec, args, builder)

    def _builder(self, spec: ServiceSpec) -> Any:
        """The service's warm builder, started if it has none or its application changed."""
        assert spec.app is not None
        source = spec.app.to_dict()
        mark = json.dumps(source, sort_keys=True, default=str)
        have = self.builders.get(spec.name)
        if have is not None and have[0] == mark:
            return have[1]
        self._end_builder(spec.name)
        env = dict(spec.app.runtime_env)
        actor = CopyBuilder.options(  # type: ignore[attr-defined]
            runtime_env=env or None, resources=HEAD
        ).remote(source)
        self.builders[spec.name] = (mark, actor)
        return actor

    def _end_builder(self, service: str) -> None:
        have = self.builders.pop(service, None)
        if have is not None:
            ray.kill(have[1])

    def _fresh(self, spec: ServiceSpec, args: tuple[Any, ...]) -> _Deploy:
        assert spec.app is not None
        env = dict(spec.app.runtime_env)
        opts = deploy_copy_task.options(runtime_env=env or None, resources=HEAD)
        return _Deploy(opts.remote(spec.app.to_dict(), *args), spec, args)

    def _count(self, service: str, what: str) -> None:
        zero = {"by_builder": 0, "by_task": 0, "builders_lost": 0}
        counts = self.deployed.setdefault(service, zero)
        counts[what] += 1

    def failed(self, service: str, node: str, why: str) -> None:
        self.failures[(service, node)] = (time.monotonic(), why)
        log.error("cannot deploy %s on %s: %s", service, node[:12], why)

    def busy(self, service: str, node: str) -> bool:
        return (service, node) in self.pending

    def may_deploy(self, service: str, node: str, retry_s: float) -> bool:
        """Not while a deploy is under way, nor within ``retry_s`` of a failed one."""
        failed = self.failures.get((service, node))
        busy = (service, node) in self.pending
        return not busy and (failed is None or time.monotonic() - failed[0] >= retry_s)

    def reap(self) -> None:
        """Collect finished deploys; a failure is logged and kept (told by status)."""
        if self.doomed:
            done, _ = ray.wait(list(self.doomed.values()), num_returns=len(self.doomed), timeout=0)
            over = {r.hex() for r in done}
            for key, ref in list(self.doomed.items()):
                if ref.hex() in over:
                    del self.doomed[key]
                    serve.delete(apps.backend_app_name(*key), _blocking=False)
        if not self.pending:
            return
        keys = list(self.pending)
        refs = [self.pending[k].ref for k in keys]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        finished = {r.hex() for r in done}
        for key, ref in zip(keys, refs, strict=True):
            if ref.hex() not in finished:
                continue
            asked = self.pending.pop(key)
            try:
                reply = ray.get(ref)
                error = None if reply.get("ok") else str(reply.get("error"))
            except Exception as e:  # a worker died, an env failed to set up
                if asked.builder is None or not isinstance(e, RayActorError):
                    self.failed(*key, " ".join(str(e).split())[:300] or type(e).__name__)
                    continue
                # the builder died (or never started): the copy goes to a fresh task
                self._drop_dead_builder(key[0], asked.builder)
                log.warning(
                    "the copy builder of %s died (%s): deploying its copy on %s by a task",
                    key[0],
                    " ".join(str(e).split())[:200],
                    key[1][:12],
                )
                self.pending[key] = self._fresh(asked.spec, asked.args)
                continue
            if error:
                self.failed(*key, error)
            else:
                self.failures.pop(key, None)
                self._count(key[0], "by_task" if asked.builder is None else "by_builder")

    def _drop_dead_builder(self, service: str, builder: Any) -> None:
        """Forget a builder that died; counted once, however many of its calls failed
        (and never the newer builder that a later copy started)."""
        have = self.builders.get(service)
        if have is not None and have[1] is builder:
            self._end_builder(service)
            self._count(service, "builders_lost")

    def delete(self, service: str, node: str) -> None:
        under_way = self.pending.pop((service, node), None)
        if under_way is not None:
            self.doomed[(service, node)] = under_way.ref
        serve.delete(apps.backend_app_name(service, node), _blocking=False)

    def forget(self, service: str) -> None:
        """The service is gone: its failures, counts and builder with it."""
        for key in [k for k in self.failures if k[0] == service]:
            del self.failures[key]
        self.deployed.pop(service, None)
        self._end_builder(service)
