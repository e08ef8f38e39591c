"""Admission: what a job may ask, checked once for the simulator and the live boundary.

Every parser that makes a :class:`JobSpec` from user input (a YAML job or an SDK dict,
:func:`lyra_ray.model.spec.parse_job_spec`; a Gavel or Philly trace line,
:mod:`lyra_ray.sim.traces`) calls :func:`check_bounds`; both drivers then call
:func:`check_admissible` with the cluster the job must run on (``lyra simulate``'s
workload, :mod:`lyra_ray.sim.workload`; the scheduler's boundary,
:mod:`lyra_ray.runtime.boundary`).

WHY bounds on finite numbers: a job whose numbers were finite but astronomical (1e300
steps, an arrival at 1e300 s, 1e-300 steps/s) passed every range check and made
``lyra simulate`` run without end. The simulator jumps from event to event, but a
round-based policy has an event every round while a job runs, so its work is the job's
run time over the round length; and past ~1e16 s a round (360 s) no longer moves a
float clock at all. The bounds keep both finite and small: a job's run time, at its
best rate on the cluster, is at most :data:`MAX_RUN_S`; clocks stay below
:data:`MAX_ARRIVAL_S` plus the trace's run times, where a float still resolves a
millisecond. Each bound is far above any real job (docs/cli.md, "What a job may ask").
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from lyra_ray.model.errors import InputError
from lyra_ray.model.types import JobSpec, ThroughputModel

MAX_STEPS = 1e15
"""Steps of one job. GPT-3's pre-training took ~1e5 optimiser steps; a step of a few
microseconds for a year is ~1e13."""
MAX_ARRIVAL_S = 1e8
"""Arrival time in seconds (~3.2 years). Real traces span days to months (Philly: 75
days); a diurnal serving demand has a point every 15 minutes up to the last arrival."""
MAX_SLO_S = 1e9
"""A deadline in seconds after arrival (~32 years): any larger one never binds."""
MAX_RUN_S = 365 * 86_400.0
"""The longest a job may take alone at its best rate on the cluster: one year. Under a
round-based policy a running job costs the simulator one core step per round (a year is
~88,000 rounds of Gavel's 360 s, a few seconds), so this bounds a one-job trace's work."""
MIN_RATE = 1e-6
"""Steps/s per worker on a GPU type the job names (one step in ~12 days)."""
MAX_RATE = 1e9
"""Steps/s per worker: no training step takes less than a nanosecond."""
MAX_WORKERS = 1_000_000
"""Workers of one job: as many GPUs as a pool may hold of one type (:mod:`.pools`)."""
MAX_CHECKPOINT_MB = 1e8
"""A checkpoint of 100 TB: a trillion-parameter model with its optimiser is ~16 TB."""
MAX_STARTUP_S = 86_400.0
"""A worker's start-up, a day: the restart model's bound (``--resize-overhead``'s)."""
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
"""Priority weights: six orders of magnitude either way of the default 1; wider ratios
only make the policies' linear programs ill-conditioned."""


def _number(source: str, field: str, v: object, lo: float, hi: float, what: str) -> None:
    """``lo <= v <= hi`` for a real number ``v``; else one line naming the field."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"{source}: field '{field}': must be a number, got {v!r}")
    try:
        ok = math.isfinite(v) and lo <= v <= hi
    except OverflowError:  # an int too large for a float
        ok = False
    if not ok:
        raise InputError(
            f"{source}: field '{field}': must be a finite number of {what} in "
            f"[{lo:g}, {hi:g}], got {v!r}"[:300]
        )


def _count(source: str, field: str, v: object, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
        raise InputError(
            f"{source}: field '{field}': must be a whole number in [1, {hi}], got {v!r}"[:300]
        )


def check_bounds(spec: JobSpec, source: str, names: Mapping[str, str] | None = None) -> None:
    """Refuse a job whose numbers no real job has; the message names the field.

    Lower bounds that a parser already states (``total_steps > 0``) are repeated here so
    that a :class:`JobSpec` made by any reader is checked the same way. ``names`` maps a
    spec field to the input's own name for it (a Gavel trace's ``arrival_time``).
    """
    try:
        _bounds(spec, source)
    except InputError as e:
        if not names:
            raise
        msg = str(e)
        for field, theirs in names.items():
            msg = msg.replace(f"field '{field}'", f"field '{theirs}'", 1)
        raise InputError(msg) from None


def _bounds(spec: JobSpec, source: str) -> None:
    _number(source, "total_steps", spec.total_steps, 0, MAX_STEPS, "steps")
    if spec.total_steps <= 0:
        raise InputError(f"{source}: field 'total_steps': must be > 0, got {spec.total_steps}")
    _number(source, "arrival_s", spec.arrival_s, 0, MAX_ARRIVAL_S, "seconds")
    if spec.slo_s is not None:
        _number(source, "slo_s", spec.slo_s, 0, MAX_SLO_S, "seconds")
        if spec.slo_s <= 0:
            raise InputError(f"{source}: field 'slo_s': must be > 0, got {spec.slo_s}")
    _number(source, "priority_weight", spec.priority_weight, MIN_WEIGHT, MAX_WEIGHT, "")
    _count(source, "min_workers", spec.min_workers, MAX_WORKERS)
    _count(source, "max_workers", spec.max_workers, MAX_WORKERS)
    for gpu, rate in (spec.throughput or {}).items():
        _number(source, f"throughput.{gpu}", rate, MIN_RATE, MAX_RATE, "steps/s per worker")
    if spec.keep_when_shared is not None:
        _number(source, "keep_when_shared", spec.keep_when_shared, 1e-9, 1.0, "")
    if spec.checkpoint_mb is not None:
        _number(source, "checkpoint_mb", spec.checkpoint_mb, 0, MAX_CHECKPOINT_MB, "MB")
    if spec.startup_s is not None:
        _number(source, "startup_s", spec.startup_s, 0, MAX_STARTUP_S, "seconds")


def check_admissible(
    spec: JobSpec,
    capacity: Mapping[str, int],
    model: ThroughputModel,
    source: str,
    field: str = "min_workers",
) -> None:
    """Refuse a job that cannot run on ``capacity`` (GPUs per type) or would run longer
    than :data:`MAX_RUN_S` at its best rate there.

    Its minimum must fit in the GPUs of one type it can run on (a selector no node
    satisfies would wait silently). ``field`` names the minimum as the input wrote it
    (a job file's ``workers`` or ``min_workers``). Call :func:`check_bounds` first.
    """
    need = spec.min_workers
    usable = {g: n for g, n in capacity.items() if model.throughput(spec, g, need) > 0}
    biggest = max(usable.values(), default=0)
    if need > biggest:
        raise InputError(
            f"{source}: field '{field}': needs {need} GPUs of one type it can run on; the "
            f"cluster has at most {biggest} of such a type ({dict(usable) or dict(capacity)})"
        )
    # the best rate: on each type, as many workers as the job may use and the type holds
    rates = [
        (model.throughput(spec, g, min(spec.max_workers, n)), min(spec.max_workers, n), g)
        for g, n in usable.items()
        if n >= need
    ]
    rate, workers, gpu = max(rates)
    if rate <= 0 or spec.total_steps / rate > MAX_RUN_S:
        run_s = spec.total_steps / rate if rate > 0 else math.inf
        raise InputError(
            f"{source}: field 'total_steps': {spec.total_steps:g} steps take {run_s:.3g} s "
            f"at the job's best rate ({rate:.3g} steps/s on {workers} {gpu}); a job may "
            f"take at most {MAX_RUN_S:g} s (one year)"
        )
