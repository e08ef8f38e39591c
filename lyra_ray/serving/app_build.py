"""Import a user's Serve application and deploy one server's copy of it.

WHY in a Ray task with the service's runtime env, never in the scheduler: importing a
module runs its code (the scheduler must survive a module that raises, exits or hangs),
and the code is in the user's ``working_dir``/``py_modules``/``pip`` packages, which only
a process started with that runtime env has. The tasks run in a fresh worker process
each (``max_calls=1``) on the head node, as a job's entrypoint check does
(:mod:`lyra_ray.runtime.entrypoint_check`); a service's later copies are deployed by its
warm :class:`CopyBuilder`, in a process of its own too.

- :func:`describe_task`: import, build, apply the ``deployments:`` overrides, and report
  the application's shape (each deployment's GPUs per replica, count, autoscaling
  config, the ingress deployment), or one line saying which field is wrong.
- :meth:`CopyBuilder.deploy` (and :func:`deploy_copy_task`): the same build, then every
  deployment pinned to one server by its ``ray.io/node-id`` label with the counts lyra
  chose (:mod:`lyra_ray.serving.copy_plan`), deployed imperatively under the copy's own name
  and internal route prefix. Imperative (``serve.run``'s path): a declarative config
  deploy would delete every application it leaves out; this touches only the copy.

The copy is built the way ``serve.run`` builds an application (Serve's ``build_app``,
with this task's runtime env as every deployment's default, so replicas get the
user's code), then handed to Serve's controller without waiting for it to run: the
serving pool watches ``serve.status()``.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

import ray

from lyra_ray.contract.labels import NODE_ID_LABEL

_GPU_KEY = "num_gpus"


class AppError(ValueError):
    """The application cannot be built as given: the message names the field."""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _import(source: Mapping[str, Any]) -> Any:
    """The bound application the import path names (a builder called with ``args``)."""
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.deployment import Application

    path = str(source["import_path"])
    try:
        target = import_attr(path)
    except BaseException as e:  # SystemExit at import is the user's too
        raise AppError(f"field 'import_path': cannot import {path!r}: {_one_line(e)}") from None
    if not isinstance(target, Application) and not isinstance(target, types.FunctionType):
        hint = "bind it: X.bind()" if hasattr(target, "bind") else "name a bound Application"
        raise AppError(
            f"field 'import_path': {path!r} is not a Serve application (got "
            f"{type(target).__name__}): {hint}, or a builder function taking args"
        )
    args = dict(source.get("args") or {})
    try:
        app = call_user_app_builder_with_args_if_necessary(target, args)
    except BaseException as e:
        # the builder's input is args (an Application given args is refused for them too)
        raise AppError(f"field 'args': building {path!r} failed: {_one_line(e)}") from None
    return app


def _build(source: Mapping[str, Any], name: str, route: str) -> Any:
    """Serve's ``BuiltApplication`` of the source, the overrides applied."""
    from ray.serve._private.build_app import build_app

    app = _import(source)
    try:
        built = build_app(
            app,
            name=name,
            route_prefix=route,
            default_runtime_env=ray.get_runtime_context().runtime_env,
        )
    except BaseException as e:
        raise AppError(f"field 'import_path': Serve cannot build it: {_one_line(e)}") from None
    by_name = {d.name: d for d in built.deployments}
    for i, raw in enumerate(source.get("deployments") or []):
        opts = {k: v for k, v in dict(raw).items() if k != "name"}
        dep = by_name.get(raw["name"])
        if dep is None:
            raise AppError(
                f"field 'deployments[{i}].name': the application has no deployment "
                f"{raw['name']!r}; it has {sorted(by_name)}"
            )
        if "autoscaling_config" in opts and opts.get("num_replicas") is None:
            opts["num_replicas"] = "auto"  # as Serve reads a config file's override
        try:
            by_name[dep.name] = dep.options(**opts)
        except BaseException as e:
            raise AppError(f"field 'deployments[{i}]': Serve refuses it: {_one_line(e)}") from None
    return dataclasses.replace(built, deployments=[by_name[d.name] for d in built.deployments])


def _shape(built: Any) -> dict[str, Any]:
    deps = []
    for d in built.deployments:
        opts = d.ray_actor_options or {}
        cfg = d._deployment_config
        auto = cfg.autoscaling_config
        deps.append(
            {
                "name": d.name,
                "num_gpus": float(opts.get(_GPU_KEY) or 0.0),
                "num_replicas": int(cfg.num_replicas or 1),
                "autoscaling": auto.model_dump(
                    mode="json",
                    include={
                        "min_replicas",
                        "max_replicas",
                        "initial_replicas",
                        "target_ongoing_requests",
                    },
                )
                if auto is not None
                else None,
            }
        )
    return {"ingress": built.ingress_deployment_name, "deployments": deps}


def describe(source: Mapping[str, Any]) -> dict[str, Any]:
    """The application's shape (see :class:`~lyra_ray.serving.copy_plan.AppShape`)."""
    return _shape(_build(source, "lyra-describe", "/"))


def pinned(dep: Any, node: str, replicas: int) -> Any:
    """``dep`` pinned to ``node`` with a fixed count (Serve's autoscaler off)."""
    opts = dict(dep.ray_actor_options or {})
    opts["label_selector"] = {**(opts.get("label_selector") or {}), NODE_ID_LABEL: node}
    return dep.options(
        num_replicas=replicas, autoscaling_config=None, ray_actor_options=opts, _internal=True
    )


def deploy_copy(
    source: Mapping[str, Any], name: str, route: str, node: str, counts: Mapping[str, int]
) -> None:
    """Deploy ``name`` at ``route``: every deployment on ``node``, ``counts`` replicas."""
    from ray.serve.context import _get_global_client

    built = _build(source, name, route)
    deps = [pinned(d, node, int(counts.get(d.name, 1))) for d in built.deployments]
    built = dataclasses.replace(built, deployments=deps)
    client = _get_global_client()
    if client is None:
        raise RuntimeError("Serve is not running")
    client.deploy_applications(
        [built], wait_for_ingress_deployment_creation=False, wait_for_applications_running=False
    )


def _guarded(fn: Any, *args: Any) -> dict[str, Any]:
    try:
        return {"ok": True, "value": fn(*args)}
    except AppError as e:
        return {"ok": False, "error": str(e)}


@ray.remote(num_cpus=0, max_retries=0, max_calls=1)
def describe_task(source: dict[str, Any]) -> dict[str, Any]:
    """``{"ok": True, "value": shape}`` or ``{"ok": False, "error": one line}``."""
    return _guarded(describe, source)


@ray.remote(num_cpus=0, max_retries=0, max_calls=1)
def deploy_copy_task(
    source: dict[str, Any], name: str, route: str, node: str, counts: dict[str, int]
) -> dict[str, Any]:
    return _guarded(deploy_copy, source, name, route, node, counts)


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
class CopyBuilder:
    """One service's warm builder: a process with the service's runtime env that keeps
    the user's modules imported, so that a reclaimed server's copy is deployed without a
    new process and a new import (the server's serving waits for it).

    WHY an actor beside the task: a fresh task per copy paid its process start and the
    user's import on every reclaim (0.7-1.4 s and 1.6-1.9 s of a 5.9-8.1 s copy deploy,
    quiet; ``benchmarks/copy_deploy.py`` measures both paths side by side). The first
    import of a service still runs in a fresh task (:func:`describe_task`): a module that
    raises or exits at import is refused there before any builder exists. A builder
    that dies is replaced, its copy deployed by :func:`deploy_copy_task` meanwhile
    (:class:`~lyra_ray.runtime.service_copies.CopyDeployer`)."""

    def __init__(self, source: dict[str, Any]) -> None:
        self.source = source

    def deploy(self, name: str, route: str, node: str, counts: dict[str, int]) -> dict[str, Any]:
        return _guarded(deploy_copy, self.source, name, route, node, counts)
