"""A user's own Ray Serve application, as a service names it: checked at the boundary.

A platform team's service is a Serve application they wrote: an import path (``module:attr``
naming a bound ``Application``, or a builder that takes ``args``), the ``args``, the
``runtime_env`` that ships its code (``working_dir``, ``py_modules``, ``pip``,
``env_vars``) and ``deployments:`` overrides, all with Serve's own field names, so that
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

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import check_runtime_env

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

DEPLOYMENT_FIELDS = (
    "name",
    "num_replicas",
    "max_ongoing_requests",
    "max_queued_requests",
    "user_config",
    "autoscaling_config",
    "graceful_shutdown_wait_loop_s",
    "graceful_shutdown_timeout_s",
    "health_check_period_s",
    "health_check_timeout_s",
    "ray_actor_options",
    "max_replicas_per_node",
    "logging_config",
    "request_router_config",
)
"""Serve's deployment fields lyra carries out, with Serve's meaning."""
REFUSED_DEPLOYMENT_FIELDS = {
    "placement_group_bundles": "lyra pins each copy to its server by node label",
    "placement_group_strategy": "lyra pins each copy to its server by node label",
    "placement_group_bundle_label_selector": "lyra pins each copy to its server by node label",
    "gang_scheduling_config": "lyra lends and reclaims whole servers, not gangs",
    "deployment_actors": "not supported on the inference pool",
    "backpressure_config": "not supported on the inference pool",
    "rolling_update_percentage": "lyra never updates a copy in place",
    "max_surge_percent": "lyra never updates a copy in place",
}
"""Serve's deployment fields lyra cannot honour, each with why (told to the user)."""
ACTOR_OPTION_FIELDS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type")
LABEL_SELECTOR = "label_selector"
AUTOSCALING_FIELDS = (
    "min_replicas",
    "initial_replicas",
    "max_replicas",
    "target_ongoing_requests",
    "metrics_interval_s",
    "look_back_period_s",
    "smoothing_factor",
    "upscale_smoothing_factor",
    "downscale_smoothing_factor",
    "upscaling_factor",
    "downscaling_factor",
    "downscale_delay_s",
    "downscale_to_zero_delay_s",
    "upscale_delay_s",
    "aggregation_function",
    "policy",
)
"""Serve's ``autoscaling_config`` fields. lyra runs replica counts itself: it reads
``target_ongoing_requests`` (the service's target per GPU replica) and, for CPU-only
deployments, ``min_replicas``/``max_replicas``; the rest are accepted and not run."""
LOGGING_FIELDS = (
    "encoding",
    "log_level",
    "logs_dir",
    "enable_access_log",
    "additional_log_standard_attrs",
)
ROUTER_FIELDS = (
    "request_router_class",
    "request_router_kwargs",
    "request_routing_stats_period_s",
    "request_routing_stats_timeout_s",
    "initial_backoff_s",
    "backoff_multiplier",
    "max_backoff_s",
)
INTERNAL_PREFIX = "/_lyra"
"""Route prefixes under this are lyra's own (the copies of users' applications)."""
MAX_ARGS_BYTES = 64 * 1024
MAX_DEPLOYMENTS = 64
MAX_REPLICAS = 10_000
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IMPORT_PATH = re.compile(rf"^{_IDENT}(\.{_IDENT})*(:{_IDENT}(\.{_IDENT})*)?$")
_DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


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


def _finite(value: Any, where: str, low: float = 0.0, high: float = 1e9) -> float:
    """A finite number in [low, high]; bools and text refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: expected a number, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise InputError(f"{where}: {value!r} is too large") from None
    if not math.isfinite(out) or not low <= out <= high:
        raise InputError(f"{where}: must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return out


def _integer(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected an integer, got {value!r}")
    if not low <= value <= high:
        raise InputError(f"{where}: must be in [{low}, {high}], got {value}")
    return value


def _json(value: Any, where: str, limit: int = MAX_ARGS_BYTES) -> Any:
    """``value`` if it is JSON (finite numbers, text keys) of at most ``limit`` bytes."""
    try:
        text = json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise InputError(f"{where}: must be JSON (text keys, finite numbers): {e}") from None
    if len(text) > limit:
        raise InputError(f"{where}: {len(text)} bytes as JSON, at most {limit}")
    return json.loads(text)


def _known(raw: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; known: {sorted(allowed)}")


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


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


def _actor_options(raw: Any, where: str) -> dict[str, Any]:
    opts = _mapping(raw, where)
    if "runtime_env" in opts:
        raise InputError(
            f"{where}.runtime_env': the application's runtime_env ships the code to every "
            "deployment; a deployment's own is not supported"
        )
    _known(opts, (*ACTOR_OPTION_FIELDS, LABEL_SELECTOR), where + "'")
    out: dict[str, Any] = {}
    for key in ("num_cpus", "num_gpus"):
        if key in opts:
            out[key] = _finite(opts[key], f"{where}.{key}'", 0.0, 1024.0)
    if "memory" in opts:
        out["memory"] = _finite(opts["memory"], f"{where}.memory'", 0.0, 1e15)
    if "resources" in opts:
        res = _mapping(opts["resources"], f"{where}.resources'")
        out["resources"] = {}
        for k, v in res.items():
            if not isinstance(k, str) or not k or k in ("CPU", "GPU", "memory"):
                raise InputError(f"{where}.resources': {k!r} is not a custom resource name")
            out["resources"][k] = _finite(v, f"{where}.resources.{k}'", 0.0, 1e9)
    if "accelerator_type" in opts:
        acc = opts["accelerator_type"]
        if not isinstance(acc, str) or not acc or len(acc) > 100:
            raise InputError(f"{where}.accelerator_type': expected a GPU type name")
        out["accelerator_type"] = acc
    if LABEL_SELECTOR in opts:
        sel = _mapping(opts[LABEL_SELECTOR], f"{where}.{LABEL_SELECTOR}'")
        for k, v in sel.items():
            if not isinstance(k, str) or not isinstance(v, str) or not k or len(k) + len(v) > 300:
                raise InputError(f"{where}.{LABEL_SELECTOR}': labels are text, got {k!r}: {v!r}")
            if k == NODE_ID_LABEL:
                raise InputError(
                    f"{where}.{LABEL_SELECTOR}.{k}': lyra pins each copy to its own server"
                )
        out[LABEL_SELECTOR] = dict(sel)
    return out


def _autoscaling(raw: Any, where: str) -> dict[str, Any]:
    cfg = _mapping(raw, where + "'")
    _known(cfg, AUTOSCALING_FIELDS, where + "'")
    out = dict(_json(cfg, where + "'"))
    for key in ("min_replicas", "initial_replicas", "max_replicas"):
        if key in cfg and cfg[key] is not None:
            _integer(cfg[key], f"{where}.{key}'", 0, MAX_REPLICAS)
    lo, hi = cfg.get("min_replicas"), cfg.get("max_replicas")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise InputError(f"{where}.min_replicas': {lo} > max_replicas {hi}")
    if "target_ongoing_requests" in cfg:
        out["target_ongoing_requests"] = _finite(
            cfg["target_ongoing_requests"], f"{where}.target_ongoing_requests'", 1e-6, 1e6
        )
    return out


def _deployment(raw: Any, i: int, service: str) -> dict[str, Any]:
    where = f"service {service!r}: field 'deployments[{i}]"
    d = _mapping(raw, where + "'")
    for k in d:
        if k in REFUSED_DEPLOYMENT_FIELDS:
            raise InputError(f"{where}.{k}': not supported: {REFUSED_DEPLOYMENT_FIELDS[k]}")
    _known(d, DEPLOYMENT_FIELDS, where + "'")
    name = d.get("name")
    if not isinstance(name, str) or not _DEPLOYMENT_NAME.match(name):
        raise InputError(f"{where}.name': required, the name of one of the app's deployments")
    out: dict[str, Any] = {"name": name}
    if "num_replicas" in d:
        n = d["num_replicas"]
        out["num_replicas"] = (
            n if n == "auto" else _integer(n, f"{where}.num_replicas'", 1, MAX_REPLICAS)
        )
    if "max_ongoing_requests" in d:
        out["max_ongoing_requests"] = _integer(
            d["max_ongoing_requests"], f"{where}.max_ongoing_requests'", 1, 1_000_000
        )
    if "max_queued_requests" in d:
        q = d["max_queued_requests"]
        if q != -1:
            _integer(q, f"{where}.max_queued_requests'", 1, 1_000_000)
        out["max_queued_requests"] = q
    if "user_config" in d:
        out["user_config"] = _json(d["user_config"], f"{where}.user_config'")
    if "autoscaling_config" in d:
        if isinstance(d.get("num_replicas"), int):
            raise InputError(
                f"{where}.num_replicas': a fixed count and an autoscaling_config together "
                "(Serve refuses them too)"
            )
        out["autoscaling_config"] = _autoscaling(
            d["autoscaling_config"], f"{where}.autoscaling_config"
        )
    for key in (
        "graceful_shutdown_wait_loop_s",
        "graceful_shutdown_timeout_s",
        "health_check_period_s",
        "health_check_timeout_s",
    ):
        if key in d:
            out[key] = _finite(d[key], f"{where}.{key}'", 0.0, 86_400.0)
    if "ray_actor_options" in d:
        out["ray_actor_options"] = _actor_options(
            d["ray_actor_options"], f"{where}.ray_actor_options"
        )
    if "max_replicas_per_node" in d:
        out["max_replicas_per_node"] = _integer(
            d["max_replicas_per_node"], f"{where}.max_replicas_per_node'", 1, MAX_REPLICAS
        )
    for key, known in (
        ("logging_config", LOGGING_FIELDS),
        ("request_router_config", ROUTER_FIELDS),
    ):
        if key in d:
            sub = _mapping(d[key], f"{where}.{key}'")
            _known(sub, known, f"{where}.{key}'")
            out[key] = _json(sub, f"{where}.{key}'")
    return out


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
    args = _json(args, _where(service, "args"))
    try:
        env = check_runtime_env(raw.get("runtime_env"))
    except InputError as e:
        raise InputError(f"service {service!r}: {e}") from None
    deps = raw.get("deployments") or []
    if not isinstance(deps, list | tuple):
        raise InputError(f"{_where(service, 'deployments')}: expected a list of deployments")
    if len(deps) > MAX_DEPLOYMENTS:
        raise InputError(f"{_where(service, 'deployments')}: at most {MAX_DEPLOYMENTS}")
    parsed = tuple(_deployment(d, i, service) for i, d in enumerate(deps))
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
    top = _mapping(raw, "serve config")
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
        app = _mapping(app, where + "'")
        _known(app, CONFIG_APP_FIELDS, where + "'")
        lyra = _mapping(app.get("lyra") or {}, where + ".lyra'")
        _known(lyra, LYRA_FIELDS, where + ".lyra'")
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
