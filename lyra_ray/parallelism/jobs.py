"""Jobs that describe their model instead of giving a throughput table.

At the boundary (job spec parsing) the planner turns the model into steps/s for every
GPU type of the cluster and every worker count the job accepts: one step is one
iteration over the global batch, so steps/s is ``1 / iteration_s`` of the best plan.
Gavel's and Lyra's policies then see, per type and size, what the job can really do
there, and 0 where it does not fit (a 18B model on eight 32 GB V100s). The core sees
only those numbers.

The job's config records the model (``parallelism.model``); when a run starts, the
runtime asks :func:`run_config` for the config of that GPU type and size, which adds the
plan chosen for it (``parallelism.plan``: t, p, d, microbatch, schedule, stages...).
The planner is deterministic, so the run gets the plan its throughput was predicted by.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from lyra_ray.parallelism.hardware import CATALOGUE
from lyra_ray.parallelism.inputs import ModelInput, parse_model
from lyra_ray.parallelism.plan import Plan, PlanOptions
from lyra_ray.parallelism.search import plan

log = logging.getLogger(__name__)

CONFIG_KEY = "parallelism"
MAX_SIZES = 64
"""Worker counts a model job may span: each is a planner search per GPU type."""
_OPTIONS = PlanOptions(top_k=1, distinct_shapes=False)
_MEMO: dict[tuple[Any, ...], Plan | None] = {}
_MEMO_MAX = 50_000


def best_plan(model: ModelInput, gpu_type: str, workers: int) -> Plan | None:
    """The planner's best plan on ``workers`` GPUs of ``gpu_type``; ``None`` if the type
    is not in the hardware catalogue or nothing fits. Memoised: specs are re-parsed
    (simulator traces, restarts) and the answer never changes."""
    gpu = CATALOGUE.get(gpu_type.lower())
    if gpu is None or workers < 1:
        return None
    key = (model.canonical, gpu.name, workers)
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        plans = plan(model.model, gpu, workers, model.batch, _OPTIONS)
        _MEMO[key] = plans[0] if plans else None
    return _MEMO[key]


def throughput_table(
    model: ModelInput, gpu_types: Iterable[str], sizes: Iterable[int]
) -> dict[str, dict[int, float]]:
    """Steps/s per GPU type and worker count (types and sizes where nothing fits are left
    out, which the throughput models read as 0)."""
    sizes = list(sizes)
    table: dict[str, dict[int, float]] = {}
    for g in sorted({x.lower() for x in gpu_types}):
        if g not in CATALOGUE:
            log.info("no hardware numbers for GPU type %r: model jobs will not use it", g)
            continue
        row = {}
        for n in sizes:
            best = best_plan(model, g, n)
            if best is not None:
                row[n] = 1.0 / best.iteration_s
        if row:
            table[g] = row
    return table


def job_config(config: Mapping[str, Any], model: ModelInput) -> dict[str, Any]:
    """The job's config with its model recorded for the runs."""
    return {**config, CONFIG_KEY: {"model": model.to_dict()}}


def run_config(config: Mapping[str, Any], gpu_type: str, workers: int) -> dict[str, Any]:
    """The config a run on ``workers`` GPUs of ``gpu_type`` receives: unchanged, or for a
    job that described its model, with ``parallelism.plan`` set to the chosen plan."""
    out = dict(config)
    section = out.get(CONFIG_KEY)
    if not isinstance(section, Mapping) or "model" not in section:
        return out
    chosen = best_plan(parse_model(section["model"]), gpu_type, workers)
    out[CONFIG_KEY] = {**section, "plan": chosen.to_dict() if chosen is not None else None}
    return out
