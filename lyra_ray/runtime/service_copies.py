"""Deploying and deleting one server's Serve application of a service, of either kind.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which decides when (a server
serves, is reclaimed, drained). This knows how, and keeps what is under way:

- a user's application (``model: app``): a copy of the whole application, built and
  deployed by a Ray task with the service's runtime env
  (:func:`~lyra_ray.serving.app_build.deploy_copy_task`), since the scheduler never
  imports user code. The task is not waited for (the scheduler's loop must not stall):
  :meth:`busy` says a copy is on its way, :meth:`reap` collects finished tasks and logs
  a failed one (the pool deploys again at its next step);
- lyra's MoE service: its devices, deployed from here as before.

Deleting is the same for both: ``serve.delete`` of the server's application.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import ray
from ray import serve

from lyra_ray.serving import apps
from lyra_ray.serving.app_build import deploy_copy_task
from lyra_ray.serving.copy_plan import AppShape
from lyra_ray.serving.spec import ServiceSpec

log = logging.getLogger(__name__)

HEAD = {"node:__internal_head__": 0.001}


def deploy_unblocked(app: Any, name: str, route: str | None) -> None:
    """Deploy without waiting for the replicas (the scheduler loop must not stall)."""
    from ray.serve.api import _run

    _run(app, _blocking=False, name=name, route_prefix=route)


class CopyDeployer:
    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], Any] = {}
        """(service, node) -> the deploy task under way."""
        self.failures: dict[tuple[str, str], tuple[float, str]] = {}
        """(service, node) -> when and why its last deploy failed (``describe`` shows it)."""
        self.doomed: dict[tuple[str, str], Any] = {}
        """Deploy tasks under way for applications deleted meanwhile: deleted again once
        the task is done (it may have deployed after the first delete)."""

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
        if (spec.name, node) in self.pending:
            return
        env = dict(spec.app.runtime_env)
        ref = deploy_copy_task.options(runtime_env=env or None, resources=HEAD).remote(
            spec.app.to_dict(), name, apps.copy_route(spec.name, node), node, dict(counts)
        )
        self.pending[(spec.name, node)] = ref

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
        """Collect finished deploy tasks; a failure is logged and kept (told by status)."""
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
        refs = [self.pending[k] for k in keys]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        finished = {r.hex() for r in done}
        for key, ref in zip(keys, refs, strict=True):
            if ref.hex() not in finished:
                continue
            del self.pending[key]
            try:
                reply = ray.get(ref)
                error = None if reply.get("ok") else str(reply.get("error"))
            except Exception as e:  # the task's worker died, its env failed to set up
                error = " ".join(str(e).split())[:300] or type(e).__name__
            if error:
                self.failures[key] = (time.monotonic(), error)
                log.error("deploying %s on %s failed: %s", key[0], key[1][:12], error)
            else:
                self.failures.pop(key, None)

    def delete(self, service: str, node: str) -> None:
        ref = self.pending.pop((service, node), None)
        if ref is not None:
            self.doomed[(service, node)] = ref
        serve.delete(apps.backend_app_name(service, node), _blocking=False)

    def forget(self, service: str) -> None:
        for key in [k for k in self.failures if k[0] == service]:
            del self.failures[key]
