"""A job's runtime environment on the submitting side: inherit, read, upload.

WHY: a user's training function lives in *their* directory, not in lyra's. Ray's runtime
environments are how code reaches workers: a local directory is zipped into the
cluster's GCS as a content-addressed ``gcs://_ray_pkg_<hash>.zip`` package, and every
worker started with that ``working_dir`` runs from an unpacked copy. lyra carries one
runtime env per job from the submitter to every Train run of every generation.

- :func:`client_env` (the submitting side): the driver's own job runtime env
  (``ray.get_runtime_context().runtime_env``; inside ``ray job submit --working-dir D``
  that is ``D`` already uploaded), then ``lyra submit --working-dir`` / the SDK's
  ``runtime_env=``, then the job's own ``runtime_env`` field, each overriding the last.
  Local paths are uploaded with the functions ``ray.init`` itself uses for a driver's
  runtime env (``ray._private.runtime_env.working_dir.upload_working_dir_if_needed`` and
  ``py_modules.upload_py_modules_if_needed``, ``ray/_private/worker.py`` in Ray 2.60):
  Ray has no public "upload this directory" call, and ``ray.init(runtime_env=...)``
  uploads only for the process's own job, once, which an SDK already connected
  cannot redo.

The scheduler's half (Ray's own check of an uploaded env, and keeping its packages
alive between a job's generations) is :mod:`lyra_ray.runtime.job_env`: a client never
pins packages, and the scheduler never uploads a directory.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import check_runtime_env, inherited, is_uri, merge

log = logging.getLogger(__name__)

JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
"""Set by Ray's job manager for a ``ray job submit`` driver: its runtime env and metadata."""


def ray_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The submission id of the ``ray job submit`` job this process is the driver of.

    Ray 2.60 has no ``RAY_JOB_SUBMISSION_ID`` variable and no runtime-context getter for
    it; the job manager writes it into the driver's job config (``metadata``)."""
    raw = (os.environ if environ is None else environ).get(JOB_CONFIG_ENV)
    if not raw:
        return None
    try:
        sid = json.loads(raw).get("metadata", {}).get("job_submission_id")
    except (ValueError, AttributeError):
        return None
    return str(sid) if isinstance(sid, str) and sid else None


def driver_env() -> tuple[dict[str, Any], list[str]]:
    """(what a job inherits from this driver's own Ray job runtime env, keys left out)."""
    import ray

    try:
        env = dict(ray.get_runtime_context().runtime_env or {})
    except Exception:  # not connected, or an env Ray cannot read back
        env = {}
    return inherited(env)


def _local(path: str, base: Path, field: str) -> str:
    p = Path(path).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.exists():
        raise InputError(f"field '{field}': {str(p)!r} does not exist")
    return str(p.resolve())


def _requirements(path: str, base: Path, field: str) -> list[str]:
    p = Path(_local(path, base, field))
    try:
        lines = p.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"field '{field}': cannot read {str(p)!r}: {e}") from None
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def read_pip_files(env: Mapping[str, Any], base: str | Path = ".") -> dict[str, Any]:
    """``env`` with a requirements file (``pip: FILE`` or ``pip: {packages: FILE}``, as
    Ray accepts both) read into its list of packages on this machine, relative to
    ``base``: the file is not on the cluster, the list travels."""
    out, base = dict(env), Path(base)
    pip = out.get("pip")
    if isinstance(pip, str):
        out["pip"] = _requirements(pip, base, "runtime_env.pip")
    elif isinstance(pip, Mapping) and isinstance(pip.get("packages"), str):
        packages = _requirements(pip["packages"], base, "runtime_env.pip.packages")
        out["pip"] = {**pip, "packages": packages}
    return out


def upload(env: Mapping[str, Any], base: str | Path = ".") -> dict[str, Any]:
    """``env`` with its local paths (relative to ``base``) uploaded to the cluster's GCS
    and a requirements file read into a list; URIs pass untouched. Needs a connected
    Ray driver (the packages go through its GCS connection)."""
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
    from ray._private.runtime_env.working_dir import upload_working_dir_if_needed

    base = Path(base)
    out = dict(check_runtime_env(env))
    wd = out.get("working_dir")
    if isinstance(wd, str) and not is_uri(wd):
        out["working_dir"] = _local(wd, base, "runtime_env.working_dir")
    if out.get("py_modules"):
        out["py_modules"] = [
            m if is_uri(m) else _local(m, base, f"runtime_env.py_modules[{i}]")
            for i, m in enumerate(out["py_modules"])
        ]
    out = read_pip_files(out, base)
    gitignore = os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1"
    with tempfile.TemporaryDirectory(prefix="lyra-pkg-") as scratch:
        try:
            out = upload_py_modules_if_needed(out, include_gitignore=gitignore, scratch_dir=scratch)
            out = upload_working_dir_if_needed(
                out, include_gitignore=gitignore, scratch_dir=scratch
            )
        except (ValueError, TypeError, RuntimeError, OSError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputError(f"field 'runtime_env': cannot package it: {first}") from None
    out.pop("excludes", None)
    return out


def client_env(
    job: Mapping[str, Any],
    base: str | Path = ".",
    extra: Mapping[str, Any] | None = None,
    inherit: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """The runtime env a client sends with ``job`` (uploaded), and the driver's keys it
    left out. ``extra`` (``--working-dir``, the SDK's ``runtime_env=``) is relative to
    the current directory; the job's own field to ``base`` (its YAML file's folder)."""
    env, dropped = driver_env() if inherit else ({}, [])
    if extra:
        env = merge(env, upload(extra, "."))
    own = job.get("runtime_env")
    if own:
        env = merge(env, upload(own, base))
    return env, dropped
