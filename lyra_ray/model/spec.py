"""Parsing and validating user input: job specs, YAML job lists and cluster specs.

Bad input is refused here, at the boundary, with a message that names the source, the
job and the field; nothing invalid reaches the core. Pydantic does the field checks;
this module turns its errors into one readable line each.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lyra_ray.model import JobSpec, Node, Pool
from lyra_ray.model.admission import check_bounds
from lyra_ray.model.errors import InputError
from lyra_ray.model.errors import read_text_input as read_text_input  # re-exported
from lyra_ray.model.plugins import plan_model
from lyra_ray.model.pools import check_gpus_per_node, parse_pool
from lyra_ray.model.runtime_env import check_backend, check_runtime_env

SpecError = InputError


class _JobInput(BaseModel):
    """The accepted shape of one job in a YAML list or an SDK dict."""

    # allow_inf_nan=False: an infinite total_steps or throughput passed every range
    # check and reached the core, which cannot finish (or int()) such a job.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(min_length=1)
    total_steps: float = Field(gt=0)
    arrival_s: float = Field(default=0.0, ge=0)
    workers: int | None = Field(default=None, ge=1)
    min_workers: int | None = Field(default=None, ge=1)
    max_workers: int | None = Field(default=None, ge=1)
    user: str = "default"
    priority_weight: float = Field(default=1.0, gt=0)
    job_type: str | None = None
    profile: str | None = Field(default=None, min_length=1)
    """The entry of the scheduler's throughput table that ``lyra profile`` measured this
    job under (its name in the profiled job file): a user's own job then uses measured
    rates, alone and in pairs, like a catalogue job type."""
    throughput: dict[str, float] | None = None
    scaling: str = "linear"
    slo_s: float | None = Field(default=None, gt=0)
    keep_when_shared: float | None = Field(default=None, gt=0, le=1)
    checkpoint_mb: float | None = Field(default=None, ge=0)
    """One checkpoint's size in MB: it prices the job's restarts (docs/lyra.md)."""
    startup_s: float | None = Field(default=None, ge=0)
    """A worker's start-up, fresh process to first step without the restore (s)."""
    entrypoint: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    model: Any = None
    """A model description (name or mapping, :mod:`lyra_ray.parallelism.inputs`); its
    throughput per GPU type and size then comes from the parallelism planner."""
    runtime_env: Any = None
    """Ray's runtime env for the job's runs (:mod:`lyra_ray.model.runtime_env`, checked
    in :func:`parse_job_spec`): it travels beside the spec, not in it (the core never
    needs it)."""
    backend: Any = None
    """The process-group backend: ``auto`` (default), ``gloo`` or ``nccl``."""

    @field_validator("throughput")
    @classmethod
    def _positive_throughput(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("must name at least one GPU type")
        for gpu, t in v.items():
            if t <= 0:
                raise ValueError(f"steps/s on {gpu!r} must be > 0, got {t}")
        return {k.lower(): float(t) for k, t in v.items()}

    @field_validator(
        "total_steps",
        "arrival_s",
        "priority_weight",
        "slo_s",
        "checkpoint_mb",
        "startup_s",
        mode="before",
    )
    @classmethod
    def _not_a_bool(cls, v: Any) -> Any:
        """``true`` would pass as 1 (a number written as text, ``1e6``, stays accepted:
        YAML reads an exponent without a dot as a string)."""
        if isinstance(v, bool):
            raise ValueError(f"must be a number, got {v!r}")
        return v

    @field_validator("keep_when_shared", mode="before")
    @classmethod
    def _a_number(cls, v: Any) -> Any:
        """A share is a number: ``true`` or ``"0.5"`` would pass as 1.0 and 0.5."""
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ValueError(f"must be a number in (0, 1], got {v!r}")
        return v

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint_shape(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[\w.]+:[\w]+", v):
            raise ValueError(f"must look like 'module:function', got {v!r}")
        return v

    @field_validator("config")
    @classmethod
    def _json_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        """The config travels through the SQLite inbox and the run as JSON: a value JSON
        cannot hold (a YAML date, a set) used to pass here and fail in the store."""
        try:
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as e:
            raise ValueError(
                f"must be JSON data (strings, finite numbers, lists, maps): {e}"
            ) from None
        return v

    @model_validator(mode="after")
    def _sizes(self) -> _JobInput:
        if self.workers is not None and (self.min_workers or self.max_workers):
            raise ValueError("give either 'workers' or 'min_workers'/'max_workers', not both")
        lo = self.workers or self.min_workers or 1
        hi = self.workers or self.max_workers or lo
        if lo > hi:
            raise ValueError(f"min_workers ({lo}) > max_workers ({hi})")
        if self.profile is not None and self.job_type is not None:
            raise ValueError("give 'profile' or 'job_type', not both: each names a table entry")
        kinds = ("throughput", "job_type", "profile", "model")
        given = [k for k in kinds if getattr(self, k) is not None]
        if not given:
            raise ValueError(
                "give 'throughput' (steps/s per worker per GPU type), 'job_type', 'profile' "
                "or 'model'"
            )
        if "model" in given and len(given) > 1:
            raise ValueError(f"give 'model' or {given[0]!r}, not both: the planner sets throughput")
        return self


def _format_error(source: str, e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "job"
        if not loc.isprintable():  # a user's key holding a newline: keep the message one line
            loc = loc.encode("unicode_escape").decode("ascii")
        msg = " ".join(err["msg"].removeprefix("Value error, ").split())
        parts.append(f"{source}: field '{loc}': {msg}")
    return "; ".join(parts)


def parse_job_spec(
    raw: Mapping[str, Any],
    source: str = "job",
    known_gpu_types: Iterable[str] | None = None,
    known_job_types: Iterable[str] | None = None,
    known_curves: Iterable[str] | None = None,
) -> JobSpec:
    """Validate one job (a YAML entry or an SDK dict) and build its :class:`JobSpec`."""
    if not isinstance(raw, Mapping):
        raise InputError(f"{source}: a job must be a mapping of fields, got {type(raw).__name__}")
    try:
        j = _JobInput.model_validate(dict(raw))
    except ValidationError as e:
        raise InputError(_format_error(source, e)) from None
    if known_gpu_types is not None and j.throughput is not None:
        # A throughput table says what a job *can* run on: a type this cluster lacks is
        # simply unused. Only a job that can run on none of the cluster's types is bad.
        known = {g.lower() for g in known_gpu_types}
        if not any(v > 0 for g, v in j.throughput.items() if g in known):
            raise InputError(
                f"{source}: field 'throughput': no GPU type the job can run on "
                f"({sorted(j.throughput)}) is in the cluster, which has {sorted(known)}"
            )
    if (
        known_job_types is not None
        and j.job_type is not None
        and j.job_type not in set(known_job_types)
    ):
        raise InputError(f"{source}: field 'job_type': unknown job type {j.job_type!r}")
    if (
        known_job_types is not None
        and j.profile is not None
        and j.profile not in set(known_job_types)
    ):
        raise InputError(
            f"{source}: field 'profile': the throughput table has no entry {j.profile!r} "
            "(measure it with 'lyra profile run', seed it with 'lyra up --throughputs')"
        )
    if known_curves is not None and j.scaling not in set(known_curves):
        raise InputError(
            f"{source}: field 'scaling': unknown curve {j.scaling!r}; known: {sorted(known_curves)}"
        )
    run_options(raw, source)
    lo = j.workers or j.min_workers or 1
    hi = j.workers or j.max_workers or lo
    spec = JobSpec(
        name=j.name,
        total_steps=j.total_steps,
        min_workers=lo,
        max_workers=hi,
        user=j.user,
        priority_weight=j.priority_weight,
        job_type=j.profile or j.job_type,  # a profiled job is looked up like a job type
        throughput=j.throughput,
        scaling=j.scaling,
        slo_s=j.slo_s,
        keep_when_shared=j.keep_when_shared,
        checkpoint_mb=j.checkpoint_mb,
        startup_s=j.startup_s,
        arrival_s=j.arrival_s,
        entrypoint=j.entrypoint,
        config=dict(j.config),
    )
    check_bounds(spec, source)  # before the planner sizes a model for its worker counts
    if j.model is None:
        return spec
    # the registered planner's (lyra_ray.model.plugins): parallelism sits above the model
    by_size, config = plan_model(j.model, dict(j.config), lo, hi, source, known_gpu_types)
    return dataclasses.replace(spec, config=config, throughput_by_size=by_size)


def run_options(
    raw: Mapping[str, Any], source: str = "job", uploaded: bool = False
) -> tuple[dict[str, Any], str]:
    """(runtime env, backend) of a job mapping, checked; ``uploaded``: as the scheduler
    receives them (URIs only). Raises :class:`InputError` naming the field."""
    try:
        env = check_runtime_env(raw.get("runtime_env"), uploaded=uploaded)
        backend = check_backend(raw.get("backend"))
    except InputError as e:
        raise InputError(f"{source}: {e}") from None
    return env, backend


def safe_load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load`` whose every failure is an InputError naming the source.

    PyYAML raises more than ``YAMLError``: an impossible date (``2020-13-01``) is a
    ``ValueError`` from ``datetime``, ``!!float`` with no value an ``IndexError``, deep
    nesting a ``RecursionError``; all used to escape as tracebacks (found by
    ``tests/unit/test_fuzz_inputs.py``). Parsing is all this does, so any exception
    means the text is malformed.
    """
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        what = " ".join(str(getattr(e, "problem", None) or e).split())  # one line
        raise InputError(f"{source}: {where}malformed YAML: {what}") from None
    except RecursionError:
        raise InputError(f"{source}: malformed YAML: nested too deeply") from None
    except Exception as e:  # PyYAML's constructors: ValueError, IndexError ('!!float')...
        what = " ".join(str(e).split())
        raise InputError(f"{source}: malformed YAML: {type(e).__name__}: {what}") from None


def _job_entries(text: str, source: str, **known: Any) -> list[tuple[Any, JobSpec]]:
    """Each job of a YAML job list (``jobs: [...]``) or single job mapping, as written
    and as parsed; names must be unique."""
    doc = safe_load_yaml(text, source)
    if isinstance(doc, Mapping) and "jobs" in doc:
        entries = doc["jobs"]
        if not isinstance(entries, list):
            raise InputError(f"{source}: field 'jobs': must be a list of jobs")
    elif isinstance(doc, Mapping):
        entries = [doc]
    else:
        raise InputError(f"{source}: expected a mapping with a 'jobs' list")
    out = [(e, parse_job_spec(e, f"{source}: jobs[{i}]", **known)) for i, e in enumerate(entries)]
    names = [s.name for _, s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{source}: field 'name': duplicate job name(s) {dup}")
    return out


def parse_job_list(text: str, source: str, **known: Any) -> list[JobSpec]:
    """Parse a YAML job list (``jobs: [...]``) or a single job mapping."""
    return [spec for _, spec in _job_entries(text, source, **known)]


def load_job_file(path: str | Path, **known: Any) -> list[JobSpec]:
    text = read_text_input(path, "job file")
    return parse_job_list(text, str(Path(path)), **known)


def load_job_entries(path: str | Path, **known: Any) -> list[dict[str, Any]]:
    """The jobs of a file as the user wrote them (each checked like
    :func:`load_job_file`): what a client sends to the scheduler, which parses them
    again with what only the live cluster knows. WHY not the parsed specs: a spec keeps
    what parsing derived (a model's planned throughputs), not the fields it came from."""
    text = read_text_input(path, "job file")
    return [dict(raw) for raw, _ in _job_entries(text, str(Path(path)), **known)]


def parse_cluster(
    spec: str,
    gpus_per_node: int = 1,
    pool: Pool = "training",
    prefix: str = "",
    flag: str = "--cluster",
) -> list[Node]:
    """The nodes of a pool written in the one grammar (:mod:`lyra_ray.model.pools`):
    ``v100=8,p100=2x4`` is eight V100s in servers of ``gpus_per_node`` and two servers of
    four P100s."""
    per = check_gpus_per_node(gpus_per_node)
    return parse_pool(spec, flag).nodes(per, pool, prefix)
