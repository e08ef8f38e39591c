"""Does a user's service build? Asked of a short-lived Ray task, never the scheduler.

The scheduler's boundary for ``model: app`` services, before anything is deployed:

1. the runtime env as the scheduler receives it (URIs only, no requirements file:
   the client uploaded and read those), then Ray's own check of it and whether the
   cluster's GCS still holds its packages (:func:`~lyra_ray.runtime.job_env.ray_check`,
   as for a job);
2. the application itself, imported and built in a fresh worker with that runtime env
   (:func:`~lyra_ray.serving.app_build.describe_task`) under a timeout after which the
   task is killed: does the path import, is it an application, do the ``deployments:``
   overrides name its deployments and does Serve accept them;
3. its shape: at least one GPU deployment (a service with none has nothing to lend).

Each refusal is one line naming the field, and nothing has been deployed.
"""

from __future__ import annotations

import ray

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import check_runtime_env
from lyra_ray.runtime.job_env import ray_check
from lyra_ray.serving.app_build import describe_task
from lyra_ray.serving.copy_plan import AppShape, check_has_gpu
from lyra_ray.serving.spec import ServiceSpec

HEAD = {"node:__internal_head__": 0.001}
"""User code is imported on the head node, where the scheduler's own tasks run."""


def check_app(spec: ServiceSpec, timeout_s: float) -> AppShape:
    """The application's shape, or an InputError naming the field."""
    assert spec.app is not None
    name = spec.name
    try:
        env = check_runtime_env(spec.app.runtime_env, uploaded=True)
        ray_check(env)
    except InputError as e:
        raise InputError(f"service {name!r}: {e}") from None
    ref = describe_task.options(runtime_env=env or None, resources=HEAD).remote(spec.app.to_dict())
    path = spec.app.import_path
    try:
        reply = ray.get(ref, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        raise InputError(
            f"service {name!r}: field 'import_path': building {path!r} did not finish within "
            f"{timeout_s:.0f} s (a module that blocks at import, or a runtime env still "
            "installing); it was stopped"
        ) from None
    except ray.exceptions.RuntimeEnvSetupError as e:
        first = " ".join(str(e).split())[:300]
        raise InputError(
            f"service {name!r}: field 'runtime_env': Ray could not set it up: {first}"
        ) from None
    except ray.exceptions.RayError as e:
        raise InputError(
            f"service {name!r}: field 'import_path': importing {path!r} ended its worker "
            f"process ({type(e).__name__})"
        ) from None
    if not reply["ok"]:
        raise InputError(f"service {name!r}: {reply['error']}")
    shape = AppShape.from_dict(reply["value"])
    check_has_gpu(shape, name)
    return shape
