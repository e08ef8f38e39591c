"""A user's own Ray Serve application, as a service names it: checked at the boundary.

A platform team's service is a Serve application they wrote: an import path (``module:attr``
naming a bound ``Application``, or a builder that takes ``args``), the ``args``, the
``runtime_env`` that ships its code (``working_dir``, ``py_modules``, ``pip``,
``env_vars``) and ``deployments:`` overrides (each checked in
:mod:`lyra_ray.serving.app_deployment`), all with Serve's own field names, so that
the same application runs under ``serve run`` and under lyra. lyra deploys one copy of
the whole application per serving server (:mod:`lyra_ray.serving.app_build`).

WHY lyra checks every field itself: Serve's config schema ignores keys it does not
know, so a misspelt ``max_ongoing_request`` would be dropped without a word. Every
field here is either one lyra carries out or refused, naming it. What only importing the
code can tell (does the path import, is it an application, which deployments hold GPUs)
is checked by the scheduler in a Ray task with the service's runtime env
(:mod:`lyra_ray.runtime.app_check`), before anything is deployed.

:func:`parse_serve_config` reads Serve's own config file (``applications: [...]``) with
a ``lyra:`` block per application into the same service fields.

Pure: no Ray. Bad input raises :class:`~lyra_ray.model.errors.InputError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import check_runtime_env
from lyra_ray.serving.app_deployment import check_deployment
from lyra_ray.serving.app_fields import json_value, known, mapping

APP_FIELDS = ("import_path", "args", "runtime_env", "deployments")
"""A service's fields that describe the user's application (beside name and route)."""
LYRA_FIELDS = (
    "target_ongoing_per_replica",
    "min_servers",
    "smoothing_s",
    "up_after_s",
    "down_after_s",
    "replicas_per_server",
)
"""What a Serve config's ``lyra:`` block may hold: how lyra sizes the service."""
CONFIG_APP_FIELDS = ("name", "route_prefix", *APP_FIELDS, "lyra")
"""The fields of one entry of a Serve config's ``applications``."""

INTERNAL_PREFIX = "/_lyra"
"""Route prefixes under this are lyra's own (the copies of users' applications)."""
MAX_DEPLOYMENTS = 64
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IMPORT_PATH = re.compile(rf"^{_IDENT}(\.{_IDENT})*(:{_IDENT}(\.{_IDENT})*)?$")


def routes_clash(a: str, b: str) -> bool:
    """Whether two route prefixes would share requests: Serve sends each request to the
    longest matching prefix, so ``/a/b`` takes part of ``/a``'s paths (and ``/`` of all)."""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    if a == b or "/" in (a, b):
        return True
    return a.startswith(b + "/") or b.startswith(a + "/")


def check_not_internal(route: str, service: str) -> None:
    if route != "/" and routes_clash(route, INTERNAL_PREFIX):
        raise InputError(f"{_where(service, 'route')}: {route} is lyra's internal route prefix")


@dataclass(frozen=True)
class AppSource:
    """The user's application: what to import, with what, and Serve's overrides."""

    import_path: str
    args: Mapping[str, Any] = field(default_factory=dict)
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    deployments: tuple[Mapping[str, Any], ...] = ()
    """Serve's ``deployments:`` overrides, by deployment name, as given (checked)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "import_path": self.import_path,
            "args": dict(self.args),
            "runtime_env": dict(self.runtime_env),
            "deployments": [dict(d) for d in self.deployments],
        }


def _where(service: str, key: str) -> str:
    return f"service {service!r}: field '{key}'"


def check_import_path(value: Any, where: str) -> str:
    """``module:attr`` or ``module.attr`` (Serve's two spellings)."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: expected 'module:attr', got {value!r}")
    if (
        len(value) > 1000
        or not _IMPORT_PATH.match(value)
        or (":" not in value and "." not in value)
    ):
        raise InputError(
            f"{where}: {value!r} is not an import path ('module:attr' or 'module.attr', "
            "where attr is a bound Serve application or a builder taking args)"
        )
    return value


def parse_app_source(raw: Mapping[str, Any], service: str) -> AppSource:
    """The application fields of a service (``import_path`` required)."""
    if "import_path" not in raw:
        raise InputError(
            f"{_where(service, 'import_path')}: required: your Serve application as "
            "'module:attr' (or model: moe for lyra's built-in MoE service)"
        )
    path = check_import_path(raw["import_path"], _where(service, "import_path"))
    args = raw.get("args") or {}
    if not isinstance(args, Mapping):
        raise InputError(f"{_where(service, 'args')}: expected a mapping (a builder's args)")
    args = json_value(args, _where(service, "args"))
    try:
        env = check_runtime_env(raw.get("runtime_env"))
    except InputError as e:
        raise InputError(f"service {service!r}: {e}") from None
    deps = raw.get("deployments") or []
    if not isinstance(deps, list | tuple):
        raise InputError(f"{_where(service, 'deployments')}: expected a list of deployments")
    if len(deps) > MAX_DEPLOYMENTS:
        raise InputError(f"{_where(service, 'deployments')}: at most {MAX_DEPLOYMENTS}")
    parsed = tuple(check_deployment(d, i, service) for i, d in enumerate(deps))
    names = [d["name"] for d in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{_where(service, 'deployments')}: {twice} listed more than once")
    return AppSource(path, args, env, parsed)


def parse_serve_config(raw: Any) -> list[dict[str, Any]]:
    """A Serve config file (``applications: [...]``, a ``lyra:`` block per application)
    as service mappings for :func:`~lyra_ray.serving.spec.parse_service_spec`.

    Only ``applications`` is read at the top: lyra runs the HTTP proxy, so Serve's
    ``proxy_location``, ``http_options`` and the rest are refused by name, as is any
    field of an application lyra does not carry out. The service's own checks name a
    field as ``applications[i].FIELD`` (``applications[i].lyra.FIELD`` for lyra's)."""
    top = mapping(raw, "serve config")
    unknown = sorted(str(k) for k in top if k != "applications")
    if unknown:
        raise InputError(
            f"serve config: field(s) {unknown} not supported: lyra runs Serve's proxy and "
            "reads only 'applications'"
        )
    apps = top.get("applications")
    if not isinstance(apps, list) or not apps:
        raise InputError("serve config: field 'applications': expected a non-empty list")
    out: list[dict[str, Any]] = []
    for i, app in enumerate(apps):
        where = f"serve config: field 'applications[{i}]"
        app = mapping(app, where + "'")
        known(app, CONFIG_APP_FIELDS, where + "'")
        lyra = mapping(app.get("lyra") or {}, where + ".lyra'")
        known(lyra, LYRA_FIELDS, where + ".lyra'")
        svc = {k: v for k, v in app.items() if k in APP_FIELDS or k == "name"}
        if app.get("route_prefix") is not None:
            svc["route"] = app["route_prefix"]
        svc.update(lyra)
        out.append(svc)
    names = [str(s.get("name")) for s in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"serve config: field 'applications': names {twice} used twice")
    return out


def config_field(message: str, index: int) -> str:
    """A service's refusal, its field renamed to where it sits in a Serve config."""

    def rename(m: re.Match[str]) -> str:
        key = m.group(1)
        top = key.split(".")[0].split("[")[0]
        if top in LYRA_FIELDS:
            return f"field 'applications[{index}].lyra.{key}'"
        if top == "route":
            return f"field 'applications[{index}].route_prefix'"
        return f"field 'applications[{index}].{key}'"

    return re.sub(r"field '([^']+)'", rename, message, count=1)
