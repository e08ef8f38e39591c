"""The parallelism planner as the job-spec parser's model planner.

WHY a registration and not an import: :mod:`lyra_ray.model.spec` parses a job's
``model:`` field, but the model layer imports nothing above it, and this planner sits
above the model (it raises the model's errors). Importing :mod:`lyra_ray.parallelism`
registers :func:`plan_job_model` with :mod:`lyra_ray.model.plugins`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.plugins import register_model_planner
from lyra_ray.parallelism import jobs
from lyra_ray.parallelism.hardware import CATALOGUE
from lyra_ray.parallelism.inputs import parse_model


def plan_job_model(
    raw: Any,
    config: dict[str, Any],
    lo: int,
    hi: int,
    source: str,
    known_gpu_types: Iterable[str] | None,
) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """A model job's steps/s per GPU type and size, and its config with the model kept."""
    try:
        model = parse_model(raw, "model")
    except InputError as e:
        field, _, msg = str(e).partition(": ")
        raise InputError(f"{source}: field '{field}': {msg}") from None
    if jobs.CONFIG_KEY in config:
        raise InputError(f"{source}: field 'config.{jobs.CONFIG_KEY}': set by lyra for a model")
    if hi - lo + 1 > jobs.MAX_SIZES:
        raise InputError(
            f"{source}: field 'max_workers': a job with a model may span at most "
            f"{jobs.MAX_SIZES} worker counts, got {lo}..{hi}"
        )
    types = sorted({g.lower() for g in known_gpu_types} if known_gpu_types else CATALOGUE)
    table = jobs.throughput_table(model, types, range(lo, hi + 1))
    if not table:
        raise InputError(
            f"{source}: field 'model': {model.model.name} does not fit on {lo}..{hi} GPUs "
            f"of any type the planner knows in {types} (known: {sorted(CATALOGUE)})"
        )
    return table, jobs.job_config(config, model)


register_model_planner(plan_job_model)
