"""One ``deployments:`` override of a user's Serve application, checked with Serve's
meaning.

A service may override its application's deployments with Serve's own fields
(``num_replicas``, ``ray_actor_options``, ``autoscaling_config``, ...), so the same
overrides work under ``serve run`` and under lyra. Each field is either one lyra carries
out, checked here, or refused naming the field and why: Serve's schema would drop an
unknown key without a word, and a placement-group field would fight lyra's pinning of each
copy to its server.

Pure: no Ray. Bad input raises :class:`~lyra_ray.model.errors.InputError` naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from lyra_ray.contract.labels import NODE_ID_LABEL
from lyra_ray.model.errors import InputError
from lyra_ray.serving.app_fields import finite, integer, json_value, known, mapping

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
MAX_REPLICAS = 10_000
_DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


def _actor_options(raw: Any, where: str) -> dict[str, Any]:
    opts = mapping(raw, where)
    if "runtime_env" in opts:
        raise InputError(
            f"{where}.runtime_env': the application's runtime_env ships the code to every "
            "deployment; a deployment's own is not supported"
        )
    known(opts, (*ACTOR_OPTION_FIELDS, LABEL_SELECTOR), where + "'")
    out: dict[str, Any] = {}
    for key in ("num_cpus", "num_gpus"):
        if key in opts:
            out[key] = finite(opts[key], f"{where}.{key}'", 0.0, 1024.0)
    if "memory" in opts:
        out["memory"] = finite(opts["memory"], f"{where}.memory'", 0.0, 1e15)
    if "resources" in opts:
        res = mapping(opts["resources"], f"{where}.resources'")
        out["resources"] = {}
        for k, v in res.items():
            if not isinstance(k, str) or not k or k in ("CPU", "GPU", "memory"):
                raise InputError(f"{where}.resources': {k!r} is not a custom resource name")
            out["resources"][k] = finite(v, f"{where}.resources.{k}'", 0.0, 1e9)
    if "accelerator_type" in opts:
        acc = opts["accelerator_type"]
        if not isinstance(acc, str) or not acc or len(acc) > 100:
            raise InputError(f"{where}.accelerator_type': expected a GPU type name")
        out["accelerator_type"] = acc
    if LABEL_SELECTOR in opts:
        sel = mapping(opts[LABEL_SELECTOR], f"{where}.{LABEL_SELECTOR}'")
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
    cfg = mapping(raw, where + "'")
    known(cfg, AUTOSCALING_FIELDS, where + "'")
    out = dict(json_value(cfg, where + "'"))
    for key in ("min_replicas", "initial_replicas", "max_replicas"):
        if key in cfg and cfg[key] is not None:
            integer(cfg[key], f"{where}.{key}'", 0, MAX_REPLICAS)
    lo, hi = cfg.get("min_replicas"), cfg.get("max_replicas")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise InputError(f"{where}.min_replicas': {lo} > max_replicas {hi}")
    if "target_ongoing_requests" in cfg:
        out["target_ongoing_requests"] = finite(
            cfg["target_ongoing_requests"], f"{where}.target_ongoing_requests'", 1e-6, 1e6
        )
    return out


def check_deployment(raw: Any, i: int, service: str) -> dict[str, Any]:
    where = f"service {service!r}: field 'deployments[{i}]"
    d = mapping(raw, where + "'")
    for k in d:
        if k in REFUSED_DEPLOYMENT_FIELDS:
            raise InputError(f"{where}.{k}': not supported: {REFUSED_DEPLOYMENT_FIELDS[k]}")
    known(d, DEPLOYMENT_FIELDS, where + "'")
    name = d.get("name")
    if not isinstance(name, str) or not _DEPLOYMENT_NAME.match(name):
        raise InputError(f"{where}.name': required, the name of one of the app's deployments")
    out: dict[str, Any] = {"name": name}
    if "num_replicas" in d:
        n = d["num_replicas"]
        out["num_replicas"] = (
            n if n == "auto" else integer(n, f"{where}.num_replicas'", 1, MAX_REPLICAS)
        )
    if "max_ongoing_requests" in d:
        out["max_ongoing_requests"] = integer(
            d["max_ongoing_requests"], f"{where}.max_ongoing_requests'", 1, 1_000_000
        )
    if "max_queued_requests" in d:
        q = d["max_queued_requests"]
        if q != -1:
            integer(q, f"{where}.max_queued_requests'", 1, 1_000_000)
        out["max_queued_requests"] = q
    if "user_config" in d:
        out["user_config"] = json_value(d["user_config"], f"{where}.user_config'")
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
            out[key] = finite(d[key], f"{where}.{key}'", 0.0, 86_400.0)
    if "ray_actor_options" in d:
        out["ray_actor_options"] = _actor_options(
            d["ray_actor_options"], f"{where}.ray_actor_options"
        )
    if "max_replicas_per_node" in d:
        out["max_replicas_per_node"] = integer(
            d["max_replicas_per_node"], f"{where}.max_replicas_per_node'", 1, MAX_REPLICAS
        )
    for key, fields in (
        ("logging_config", LOGGING_FIELDS),
        ("request_router_config", ROUTER_FIELDS),
    ):
        if key in d:
            sub = mapping(d[key], f"{where}.{key}'")
            known(sub, fields, f"{where}.{key}'")
            out[key] = json_value(sub, f"{where}.{key}'")
    return out
