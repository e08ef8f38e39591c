"""An inference service as a user registers it with lyra, checked at the boundary.

A service is a Ray Serve application whose replicas (one GPU each) run only on
inference-pool servers, behind one HTTP route. lyra owns its replicas: it lends the
servers the service does not need to training and takes them back when its load
returns, so the spec carries what the demand estimate needs (the load one replica
should carry) besides what to run.

Pure: no Ray. Bad input raises :class:`~lyra_ray.model.errors.InputError` naming the
field, before anything is deployed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.errors import InputError

MODELS = ("dense", "moe")
"""The service kinds lyra knows how to build (see :mod:`lyra_ray.runtime.serving`)."""
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_FIELDS = {
    "name",
    "model",
    "route",
    "target_ongoing_per_replica",
    "replicas_per_server",
    "min_servers",
    "smoothing_s",
    "up_after_s",
    "down_after_s",
    "config",
}


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    model: str = "dense"
    route: str = ""
    """HTTP route prefix; ``/<name>`` when empty."""
    target_ongoing_per_replica: float = 2.0
    """In-flight requests one replica should carry (as in Serve's autoscaling config)."""
    replicas_per_server: int = 0
    """Replicas of this service on one server; 0: one per GPU of the server."""
    min_servers: int = 1
    """Servers the service always keeps: a Serve app at 0 replicas makes requests hang."""
    smoothing_s: float = 10.0
    up_after_s: float = 0.0
    down_after_s: float = 30.0
    config: Mapping[str, Any] = field(default_factory=dict)
    """Model knobs: :data:`KNOBS` lists each model's, with their ranges."""

    @property
    def http_route(self) -> str:
        return self.route or f"/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "route": self.http_route,
            "target_ongoing_per_replica": self.target_ongoing_per_replica,
            "replicas_per_server": self.replicas_per_server,
            "min_servers": self.min_servers,
            "smoothing_s": self.smoothing_s,
            "up_after_s": self.up_after_s,
            "down_after_s": self.down_after_s,
            "config": dict(self.config),
        }


KNOBS: dict[str, dict[str, tuple[type, float, float]]] = {
    "dense": {
        "hidden": (int, 1, 4096),
        "layers": (int, 1, 64),
        "service_ms": (float, 0, 60_000),
    },
    "moe": {
        "layers": (int, 1, 16),
        "experts": (int, 2, 64),
        "top_k": (int, 1, 8),
        "dim": (int, 2, 1024),
        "hidden": (int, 1, 8192),
        "skew": (float, 0, 10),
        "seed": (int, 0, 2**31 - 1),
        "slots": (int, 1, 64),
        "batch": (int, 1, 256),
        "seq": (int, 1, 512),
        "service_ms": (float, 0, 60_000),
        "replan_s": (float, 0, 86_400),
        "threshold": (float, 0, 2),
        "replan_gain": (float, 0, 10),
        "replan_checks": (int, 1, 100),
        "borrow": (int, 0, 1),
        "uniform": (int, 0, 1),
        "cost_dim": (int, 2, 65_536),
        "cost_hidden": (int, 1, 262_144),
        "emulate": (int, 0, 1),
    },
}
"""Per model, each knob's type and inclusive range. ``moe``: ``slots`` is how many expert
replicas of each layer one GPU holds (Lina's device slots); ``replan_s`` is how often
phase 2 re-plans from the routing actually seen (0: only when servers change), once the
layers whose shares moved past ``threshold`` would lower the busiest replica's tokens by
more than ``replan_gain`` at ``replan_checks`` checks in a row (``serving/moe_drift.py``);
``uniform: 1`` gives every expert the same replicas (the baseline); ``emulate: 1`` makes
each device call take the H200 expert-time model of its tokens for the expert shape
``cost_dim`` x ``cost_hidden`` (default the model's ``dim`` x ``hidden``) instead of the
time its real expert computation takes. Besides these numbers an MoE spec may name its
architecture (:data:`MOE_TEXT_KNOBS`)."""

MOE_TEXT_KNOBS = ("arch", "hf_config", "target_load")
"""The MoE knobs that are not numbers: ``arch``, a ``transformers`` model type (default
``mixtral``; ``qwen2_moe``, ``deepseek_v3`` or any whose experts are fused SwiGLU
tensors); ``hf_config``, fields of its config (they override ``layers``, ``experts``,
``top_k``, ``dim``, ``hidden``); ``target_load``, the popularity the routers are
calibrated to, per MoE layer a list of per-expert loads (default: Zipf of ``skew``)."""
_ARCH = re.compile(r"^[a-z][a-z0-9_\-]{0,63}$")


def _moe_text_knob(where: str, key: str, v: Any) -> Any:
    """One of :data:`MOE_TEXT_KNOBS`, checked for its shape (InputError names it)."""
    if key == "arch":
        if not isinstance(v, str) or not _ARCH.match(v):
            raise InputError(f"{where}: expected a transformers model type, got {v!r}")
        return v
    if key == "hf_config":
        ok = isinstance(v, Mapping) and all(isinstance(k, str) for k in v)
        scalar = (str, int, float, bool, type(None))
        if not ok or not all(isinstance(x, scalar) for x in v.values()):
            raise InputError(f"{where}: expected a mapping of config fields to scalars")
        bad = [k for k, x in v.items() if isinstance(x, float) and not _finite(x)]
        if bad:
            raise InputError(f"{where}.{bad[0]}: expected a finite number")
        return dict(v)
    rows = v if isinstance(v, list) else None
    ok = bool(rows) and all(isinstance(r, list) and r for r in rows or [])
    ok = ok and len({len(r) for r in rows or []}) == 1
    nums = ok and all(
        isinstance(x, int | float) and not isinstance(x, bool) and _finite(x) and x >= 0
        for r in rows or []
        for x in r
    )
    if not nums or not all(sum(r) > 0 for r in rows or []):
        raise InputError(
            f"{where}: expected per layer a list of per-expert loads (finite, >= 0, "
            "not all 0), every list as long"
        )
    return [[float(x) for x in r] for r in rows or []]


def _finite(v: float) -> bool:
    """``math.isfinite`` that also refuses an int too large for a float (10**400 raised
    OverflowError, found by ``tests/unit/test_fuzz_inputs.py``)."""
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _config(name: str, model: str, config: Any) -> dict[str, Any]:
    """The model's knobs, each checked against :data:`KNOBS` (InputError names it)."""
    if not isinstance(config, Mapping):
        raise InputError(f"service {name!r}: field 'config': expected a mapping")
    knobs = KNOBS[model]
    out: dict[str, Any] = {}
    for k, v in config.items():
        where = f"service {name!r}: field 'config.{k}'"
        if model == "moe" and k in MOE_TEXT_KNOBS:
            out[k] = _moe_text_knob(where, k, v)
            continue
        if k not in knobs:
            known = sorted(knobs) + (sorted(MOE_TEXT_KNOBS) if model == "moe" else [])
            raise InputError(f"{where}: not a knob of model {model!r}; known: {known}")
        kind, low, high = knobs[k]
        if isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v):
            raise InputError(f"{where}: expected a finite number, got {v!r}")
        if kind is int and float(v) != int(v):
            raise InputError(f"{where}: expected an integer, got {v!r}")
        if not low <= v <= high:
            raise InputError(f"{where}: must be in [{low:g}, {high:g}], got {v!r}")
        out[k] = int(v) if kind is int else float(v)
    if model == "moe":
        experts, top_k = out.get("experts", MOE_DEFAULTS["experts"]), out.get("top_k", 1)
        if top_k > experts:
            raise InputError(f"service {name!r}: field 'config.top_k': {top_k} > experts {experts}")
        if out.get("dim", MOE_DEFAULTS["dim"]) % 4:
            raise InputError(f"service {name!r}: field 'config.dim': must be a multiple of 4")
        rows = out.get("target_load")
        layers, width = out.get("layers", MOE_DEFAULTS["layers"]), len((rows or [[]])[0])
        if rows is not None and "hf_config" not in out and (len(rows), width) != (layers, experts):
            raise InputError(
                f"service {name!r}: field 'config.target_load': {len(rows)} x {width}, "
                f"want layers x experts = {layers} x {experts}"
            )
    return out


MOE_DEFAULTS: dict[str, float] = {
    "layers": 2,
    "experts": 4,
    "top_k": 1,
    "dim": 32,
    "hidden": 64,
    "skew": 1.0,
    "seed": 0,
    "slots": 3,
    "batch": 4,
    "seq": 16,
    "replan_s": 30.0,
    "threshold": 0.2,
    "replan_gain": 0.1,
    "replan_checks": 2,
    "borrow": 1,
    "uniform": 0,
}
"""The MoE service's knobs when the spec leaves them out: a small Mixtral (``arch``,
``transformers``' class, random weights) whose routers are calibrated to a skewed (Zipf)
popularity, so Lina's replica counts differ from expert to expert. Its devices compute
their experts (``emulate: 0``).
``service_ms`` has no default here: left out, each call's time comes from the H200
expert-time model of its tokens (``serving/moe_device.py``), not from a constant."""


def moe_knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every MoE knob: the spec's, else the default."""
    return {**MOE_DEFAULTS, **config}


def _number(
    raw: Mapping[str, Any], key: str, default: float, low: float, *, open_low: bool
) -> float:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v):
        raise InputError(f"service: field '{key}': expected a finite number, got {v!r}")
    if float(v) < low or (open_low and float(v) == low):
        raise InputError(f"service: field '{key}': must be {'>' if open_low else '>='} {low}")
    if float(v) > 1e6:
        raise InputError(f"service: field '{key}': {v!r} is too large")
    return float(v)


def _integer(raw: Mapping[str, Any], key: str, default: int, low: int) -> int:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"service: field '{key}': expected an integer, got {v!r}")
    if v < low or v > 10_000:
        raise InputError(f"service: field '{key}': must be in [{low}, 10000], got {v}")
    return v


def parse_service_spec(raw: Any) -> ServiceSpec:
    """A :class:`ServiceSpec` from a mapping (YAML, JSON, SDK call); InputError names the field."""
    if not isinstance(raw, Mapping):
        raise InputError(f"service: expected a mapping of fields, got {type(raw).__name__}")
    unknown = sorted(map(str, set(raw) - _FIELDS))  # keys of any type: sort as text
    if unknown:
        raise InputError(f"service: unknown field(s) {unknown}; known: {sorted(_FIELDS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            f"service: field 'name': {name!r} must be 1-31 lower-case letters, digits or '-', "
            "starting with a letter"
        )
    model = raw.get("model", "dense")
    if model not in MODELS:
        raise InputError(f"service {name!r}: field 'model': {model!r} is not one of {MODELS}")
    route = raw.get("route", "")
    if not isinstance(route, str) or (route and not re.match(r"^/[A-Za-z0-9_\-/]*$", route)):
        raise InputError(f"service {name!r}: field 'route': {route!r} must start with '/'")
    config = _config(name, model, raw.get("config", {}))
    try:
        return ServiceSpec(
            name=name,
            model=model,
            route=route,
            target_ongoing_per_replica=_number(
                raw, "target_ongoing_per_replica", 2.0, 0.0, open_low=True
            ),
            replicas_per_server=_integer(raw, "replicas_per_server", 0, 0),
            min_servers=_integer(raw, "min_servers", 1, 1),
            smoothing_s=_number(raw, "smoothing_s", 10.0, 0.0, open_low=True),
            up_after_s=_number(raw, "up_after_s", 0.0, 0.0, open_low=False),
            down_after_s=_number(raw, "down_after_s", 30.0, 0.0, open_low=False),
            config=dict(config),
        )
    except InputError as e:
        raise InputError(str(e).replace("service:", f"service {name!r}:", 1)) from None
