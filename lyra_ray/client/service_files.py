"""A service as the submitting side reads it: a file or a mapping, its code uploaded.

Two shapes are accepted, each checked field by field before the cluster is touched:

- one service's fields (``name``, ``import_path``, ``args``, ``runtime_env``,
  ``deployments``, ``route``, ``target_ongoing_per_replica``, ..., or ``model: moe``);
- a Ray Serve config file (``applications: [...]``), each application with an optional
  ``lyra:`` block (:func:`~lyra_ray.serving.app_spec.parse_serve_config`).

Each service's ``runtime_env`` is then uploaded as a job's is
(:func:`~lyra_ray.client.user_env.upload`): local ``working_dir`` and ``py_modules``
relative to the file's folder go to the cluster's GCS (Serve itself refuses a local
``working_dir``), a requirements file is read into its list. Unlike a job, a service
does not inherit the submitting driver's runtime env: a service outlives the command
that deployed it, so it runs exactly what its fields name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.serving.app_spec import config_field, parse_serve_config
from lyra_ray.serving.spec import parse_service_spec


def read_service_file(path: str | Path) -> Any:
    """The YAML (or JSON) a service file holds; InputError for an unreadable one."""
    import yaml

    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{path}: malformed YAML: {e}") from None
    if raw is None:
        raise InputError(f"{path}: empty file")
    if not isinstance(raw, Mapping):
        raise InputError(f"{path}: expected a mapping of service fields or 'applications'")
    return raw


def services_of(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The services a mapping holds, each checked (a refusal names the field where it
    sits: ``applications[i].FIELD`` in a Serve config)."""
    if not isinstance(raw, Mapping):
        raise InputError(f"service: expected a mapping of fields, got {type(raw).__name__}")
    if "applications" not in raw:
        parse_service_spec(raw)
        return [dict(raw)]
    out = parse_serve_config(raw)
    for i, svc in enumerate(out):
        try:
            parse_service_spec(svc)
        except InputError as e:
            raise InputError("serve config: " + config_field(str(e), i)) from None
    return out


def localized(services: list[dict[str, Any]], base: str | Path) -> list[dict[str, Any]]:
    """Each service with its runtime env's local paths made absolute (relative to
    ``base``) and a requirements file read: every local input checked on this machine,
    before any cluster is reached (no Ray here)."""
    from lyra_ray.client.user_env import _local, read_pip_files
    from lyra_ray.model.runtime_env import check_runtime_env, is_uri

    out = []
    for svc in services:
        env = svc.get("runtime_env")
        if not env:
            out.append(dict(svc))
            continue
        env = read_pip_files(check_runtime_env(env), base)
        wd = env.get("working_dir")
        if isinstance(wd, str) and not is_uri(wd):
            env["working_dir"] = _local(wd, Path(base), "runtime_env.working_dir")
        if env.get("py_modules"):
            env["py_modules"] = [
                m if is_uri(m) else _local(m, Path(base), f"runtime_env.py_modules[{i}]")
                for i, m in enumerate(env["py_modules"])
            ]
        out.append({**svc, "runtime_env": env})
    return out


def prepared(
    services: list[dict[str, Any]], base: str | Path, extra_env: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Each service with its runtime env uploaded (``extra_env``, relative to the
    current directory, under the service's own, relative to ``base``)."""
    from lyra_ray.client.user_env import upload
    from lyra_ray.model.runtime_env import merge

    out = []
    for svc in services:
        if svc.get("model", "app") != "app":
            out.append(dict(svc))
            continue
        env: dict[str, Any] = upload(extra_env, ".") if extra_env else {}
        own = svc.get("runtime_env")
        if own:
            env = merge(env, upload(own, base))
        item = {k: v for k, v in svc.items() if k != "runtime_env"}
        if env:
            item["runtime_env"] = env
        out.append(item)
    return out
