"""A job's Ray runtime environment and process-group backend, checked at the boundary.

WHY a module of its own: the runtime environment is how a user's own code (their
directory, extra modules, pip packages, environment variables) reaches every Train worker
of every generation of their job. It is checked twice, as a job travels: as the user
writes it (local paths allowed; the client uploads them) and as the scheduler receives it
(only URIs, since the scheduler cannot read the submitting machine's disk). Both checks
name the field that is wrong. Pure: no Ray import (the simulator parses the same files).

Only the fields lyra supports travel: ``working_dir``, ``py_modules``, ``pip`` and
``env_vars``, as Ray defines them (``excludes`` is read when a local directory is
packaged and then dropped, as ``ray.init`` does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from lyra_ray.model.errors import InputError

SUPPORTED = ("working_dir", "py_modules", "pip", "env_vars")
CLIENT_ONLY = ("excludes",)
"""Read while packaging a local directory on the submitting machine, then dropped."""
BACKENDS = ("auto", "gloo", "nccl")
TOKEN_VARS = frozenset({"LYRA_TOKEN", "LYRA_TOKEN_FILE"})
"""A lyra token never travels with a job: it would reach every worker and the state."""
MAX_ENV_BYTES = 256 * 1024
MAX_ITEMS = 256
MAX_TEXT = 4096
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URI = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_PIP_KEYS = {"packages", "pip_check", "pip_version", "pip_install_options"}


def is_uri(value: str) -> bool:
    return bool(_URI.fullmatch(value))


def _text(value: Any, field: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(f"field '{field}': expected a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InputError(f"field '{field}': must not be empty")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise InputError(f"field '{field}': at most {MAX_TEXT} characters, no NUL byte")
    return value


def _texts(value: Any, field: str) -> list[str]:
    if not isinstance(value, list | tuple):
        raise InputError(f"field '{field}': expected a list, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise InputError(f"field '{field}': at most {MAX_ITEMS} entries, got {len(value)}")
    return [_text(v, f"{field}[{i}]") for i, v in enumerate(value)]


def _location(value: Any, field: str, uploaded: bool) -> str:
    v = _text(value, field)
    if uploaded and not is_uri(v):
        raise InputError(
            f"field '{field}': {v!r} is a local path; the scheduler takes only URIs "
            "(gcs://, s3://, https://...): `lyra submit` and the SDK upload local paths"
        )
    return v


def _pip(value: Any, field: str, uploaded: bool) -> Any:
    if isinstance(value, str):
        if uploaded:
            raise InputError(
                f"field '{field}': a requirements file is read on the submitting machine; "
                "the scheduler takes the list of packages"
            )
        return _text(value, field)
    if isinstance(value, list | tuple):
        return _texts(value, field)
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _PIP_KEYS)
        if unknown:
            known = sorted(_PIP_KEYS)
            raise InputError(f"field '{field}': unknown key(s) {unknown}; known {known}")
        if "packages" not in value:
            raise InputError(f"field '{field}.packages': required")
        packages = value["packages"]
        if isinstance(packages, Mapping):
            raise InputError(f"field '{field}.packages': expected a list of packages or a file")
        out: dict[str, Any] = {"packages": _pip(packages, f"{field}.packages", uploaded)}
        if "pip_check" in value:
            if not isinstance(value["pip_check"], bool):
                raise InputError(f"field '{field}.pip_check': expected true or false")
            out["pip_check"] = value["pip_check"]
        if "pip_version" in value:
            out["pip_version"] = _text(value["pip_version"], f"{field}.pip_version")
        if "pip_install_options" in value:
            opts = value["pip_install_options"]
            out["pip_install_options"] = _texts(opts, f"{field}.pip_install_options")
        return out
    raise InputError(
        f"field '{field}': expected a list of packages, a mapping with 'packages' "
        f"or a requirements file, got {type(value).__name__}"
    )


def _env_vars(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise InputError(f"field '{field}': expected a mapping, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise InputError(f"field '{field}': at most {MAX_ITEMS} variables, got {len(value)}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not _ENV_NAME.fullmatch(k) or len(k) > 256:
            raise InputError(f"field '{field}': {k!r} is not an environment variable name")
        if k in TOKEN_VARS:
            raise InputError(
                f"field '{field}.{k}': a lyra token must not travel with the job "
                "(every worker would see it, and the scheduler would store it)"
            )
        out[k] = _text(v, f"{field}.{k}", allow_empty=True)
    return out


def check_runtime_env(
    raw: Any, field: str = "runtime_env", uploaded: bool = False
) -> dict[str, Any]:
    """A runtime environment as given, checked; ``{}`` for none.

    ``uploaded``: as the scheduler receives it (URIs only, no ``excludes``, no
    requirements file). Raises :class:`InputError` naming the field.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"field '{field}': expected a mapping, got {type(raw).__name__}")
    allowed = SUPPORTED if uploaded else SUPPORTED + CLIENT_ONLY
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(
            f"field '{field}': unsupported key(s) {unknown}; lyra supports {list(allowed)}"
        )
    out: dict[str, Any] = {}
    if "working_dir" in raw:
        out["working_dir"] = _location(raw["working_dir"], f"{field}.working_dir", uploaded)
    if "py_modules" in raw:
        mods = _texts(raw["py_modules"], f"{field}.py_modules")
        out["py_modules"] = [
            _location(m, f"{field}.py_modules[{i}]", uploaded) for i, m in enumerate(mods)
        ]
    if "pip" in raw:
        out["pip"] = _pip(raw["pip"], f"{field}.pip", uploaded)
    if "env_vars" in raw:
        out["env_vars"] = _env_vars(raw["env_vars"], f"{field}.env_vars")
    if "excludes" in raw:
        out["excludes"] = _texts(raw["excludes"], f"{field}.excludes")
    size = len(json.dumps(out))
    if size > MAX_ENV_BYTES:
        raise InputError(f"field '{field}': {size} bytes as JSON, at most {MAX_ENV_BYTES}")
    return out


def check_backend(raw: Any, field: str = "backend") -> str:
    """``auto`` (NCCL when the run's workers have CUDA, else gloo), ``gloo`` or ``nccl``."""
    if raw is None:
        return "auto"
    if not isinstance(raw, str) or raw.lower() not in BACKENDS:
        raise InputError(f"field '{field}': must be one of {list(BACKENDS)}, got {raw!r}")
    return raw.lower()


def inherited(env: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """The part of a submitting driver's own runtime env that a job inherits, and the
    keys left behind (to tell the user). Ray's own ``config`` and lyra's token stay."""
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for k, v in (env or {}).items():
        if k in SUPPORTED and v not in (None, {}, []):
            out[k] = v
        elif k not in ("config", "excludes") and v not in (None, {}, []):
            dropped.append(k)
    if isinstance(out.get("env_vars"), Mapping):
        kept = {k: v for k, v in out["env_vars"].items() if k not in TOKEN_VARS}
        if len(kept) < len(out["env_vars"]):
            dropped.append("env_vars." + "/".join(sorted(TOKEN_VARS & set(out["env_vars"]))))
        out["env_vars"] = kept
        if not kept:
            del out["env_vars"]
    return out, dropped


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` wins field by field; ``env_vars`` merge (override's win), as Ray
    merges a task's runtime env into its job's."""
    out = dict(base)
    for k, v in override.items():
        if k == "env_vars" and isinstance(out.get(k), Mapping):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def uris(env: Mapping[str, Any] | None) -> list[str]:
    """The packages a runtime env names (working_dir, py_modules), in order."""
    if not env:
        return []
    found = [env["working_dir"]] if isinstance(env.get("working_dir"), str) else []
    found += [m for m in env.get("py_modules") or [] if isinstance(m, str)]
    return [u for u in found if is_uri(u)]
