"""A Pollux/Sia workload as jobs: speeds per GPU type, total work and elastic range.

Each workload row (:func:`lyra_ray.sim.pollux.read_workload`) becomes one
:class:`JobSpec` and an entry of a throughput table (steps/s at each worker count on
each GPU type) that is the run's :class:`ThroughputModel`:

* **Work**: Pollux's own definition (:meth:`Application.total_steps`), at the row's
  batch size, which the job keeps whatever its size.
* **Speed, from the measured tables** (docs/lyra.md, "Speeds per GPU type"):

  - without ElasticFlow's tables, the Pollux profile on the type it was measured on
    (``t4``) only;
  - with them (``tables``), an application that ElasticFlow measured on *every* GPU
    type of the tables takes those tables on each type (bert and deepspeech2 on A100
    and T4); any other takes its Pollux profile on ``t4`` and, on every other type
    ``X``, the profile times the ``X``/T4 speed ratio of :data:`REFERENCE_MODEL`,
    one worker's samples/s at each table's largest batch (ElasticFlow measured
    deepspeech2 at 3.2x on an A100).
* **Range**: :func:`lyra_ray.model.elastic_range.profile_range` on those curves with
  Pollux's largest local batch (``rule="profile"``), or the former
  ``max(1, g // 2)``..``2 g`` around the row's ``num_replicas`` (``rule="doubling"``).
  The row's ``num_replicas`` is the size a non-elastic scheduler runs it at
  (``config.requested_workers``, as Pollux's Tiresias baseline does).
* **Restart**: the application's checkpoint (:data:`CHECKPOINT_MB`, estimated from its
  model's parameter count) prices its restarts (:mod:`lyra_ray.model.restart_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lyra_ray.model import JobSpec
from lyra_ray.model.admission import check_bounds
from lyra_ray.model.elastic_range import DEFAULT_FRACTION, doubling_range, profile_range
from lyra_ray.model.errors import InputError
from lyra_ray.model.throughput import CatalogueThroughputs
from lyra_ray.sim.elasticflow import SpeedTable
from lyra_ray.sim.pollux import PROFILE_GPU, Application, load_application, read_workload

REFERENCE_MODEL = "deepspeech2"
"""The ElasticFlow model whose measured speed ratio between GPU types scales the Pollux
profile of an application ElasticFlow did not measure on every type. Not bert: its
A100 and T4 tables are two configurations (~35x per GPU, beyond any A100/T4 hardware
ratio); deepspeech2's 3.2x is within it."""
MAX_WORKERS = 64
"""The largest worker count the profiles and tables measured."""
RULES = ("profile", "doubling")
CHECKPOINT_MB: Mapping[str, float] = {
    "bert": 1320.0,  # BERT-base, 110 M parameters, fp32 weights + Adam's two moments
    "cifar10": 90.0,  # ResNet-18, 11.2 M, weights + SGD momentum
    "deepspeech2": 300.0,  # DeepSpeech2, ~38 M, weights + SGD momentum
    "imagenet": 205.0,  # ResNet-50, 25.6 M, weights + SGD momentum (the H200 run's 200 MB)
    "ncf": 10.0,  # NeuMF on MovieLens, ~0.8 M, weights + Adam
    "yolov3": 500.0,  # YOLOv3, 62 M, weights + SGD momentum
}
"""Checkpoint size per Pollux application, estimated from its model's parameters (4
bytes each, times the optimiser's copies); an application not listed has none stated."""


@dataclass(frozen=True)
class ProfiledWorkload:
    specs: list[JobSpec]
    model: CatalogueThroughputs
    curves: dict[str, dict[str, dict[int, float]]]
    """Per job type (``application@batch``): GPU type -> steps/s by worker count."""


def ratio(tables: Mapping[str, Mapping[str, SpeedTable]], gpu: str, model: str) -> float:
    """One worker's samples/s of ``model`` on ``gpu`` over on ``t4`` (largest batches)."""
    try:
        a, b = tables[gpu][model], tables[PROFILE_GPU][model]
    except KeyError:
        raise InputError(
            f"--throughputs: the reference model {model!r} needs tables on {gpu!r} and "
            f"{PROFILE_GPU!r}"
        ) from None
    den = b.samples_per_s(b.largest_batch(), 1)
    num = a.samples_per_s(a.largest_batch(), 1)
    if den <= 0 or num <= 0:
        raise InputError(f"--throughputs: {model!r} has no one-worker speed on {gpu!r} or t4")
    return num / den


def speed_curves(
    app: Application,
    batch: int,
    tables: Mapping[str, Mapping[str, SpeedTable]] | None,
    reference: str = REFERENCE_MODEL,
) -> dict[str, dict[int, float]]:
    """Steps/s by worker count (1..:data:`MAX_WORKERS`) on each GPU type."""
    top = min(MAX_WORKERS, batch // max(1, app.min_local_bsz))
    counts = range(1, max(1, top) + 1)
    profile = {n: app.step_rate(batch, n) for n in counts}
    if not tables:
        return {PROFILE_GPU: profile}
    if all(app.name in by_model for by_model in tables.values()):
        return {
            g: {n: by_model[app.name].step_rate(batch, n) for n in counts}
            for g, by_model in tables.items()
        }
    out = {PROFILE_GPU: profile}
    for g in tables:
        if g != PROFILE_GPU:
            r = ratio(tables, g, reference)
            out[g] = {n: v * r for n, v in profile.items()}
    return out


def profiled_jobs(
    trace: str | Path,
    profiles: str | Path,
    tables: Mapping[str, Mapping[str, SpeedTable]] | None = None,
    rule: str = "profile",
    fraction: float = DEFAULT_FRACTION,
    reference: str = REFERENCE_MODEL,
) -> ProfiledWorkload:
    """The workload's jobs and the throughput table they run by (module doc)."""
    if rule not in RULES:
        raise InputError(f"elastic rule: expected one of {', '.join(RULES)}, got {rule!r}")
    rows = read_workload(trace)
    apps: dict[str, Application] = {}
    curves: dict[str, dict[str, dict[int, float]]] = {}
    specs: list[JobSpec] = []
    for row in rows:
        where = f"{trace}:{row.line}"
        app = apps.get(row.application)
        if app is None:
            d = Path(profiles) / row.application
            if not d.is_dir():
                raise InputError(
                    f"{where}: field 'application': no profile {row.application!r} in {profiles}"
                )
            app = apps[row.application] = load_application(d, row.application)
        if not app.init_batch_size <= row.batch_size <= app.max_batch_size:
            raise InputError(
                f"{where}: field 'batch_size': {row.batch_size} is outside the "
                f"{app.init_batch_size}-{app.max_batch_size} that {row.application!r} validated"
            )
        key = f"{row.application}@{row.batch_size}"
        if key not in curves:
            curves[key] = speed_curves(app, row.batch_size, tables, reference)
        cur = curves[key]
        if rule == "profile":
            lo, hi = profile_range(cur, row.batch_size, app.max_local_bsz, row.replicas, fraction)
        else:
            lo, hi = doubling_range(row.replicas)
        best = max((c.get(row.replicas, 0.0) for c in cur.values()), default=0.0)
        if best <= 0:
            raise InputError(
                f"{where}: field 'num_replicas': {row.application} at batch {row.batch_size} "
                f"cannot run on {row.replicas} workers by its profile"
            )
        spec = JobSpec(
            name=row.name,
            total_steps=app.total_steps(row.batch_size),
            min_workers=lo,
            max_workers=hi,
            job_type=key,
            scaling=row.application if row.application in CHECKPOINT_MB else "linear",
            arrival_s=row.arrival_s,
            checkpoint_mb=CHECKPOINT_MB.get(row.application),
            config={
                "requested_workers": row.replicas,
                "application": row.application,
                "batch_size": row.batch_size,
            },
        )
        check_bounds(spec, where, {"min_workers": "num_replicas", "arrival_s": "time"})
        specs.append(spec)
    alone: dict[tuple[str, int], dict[str, float]] = {}
    for key, by_type in curves.items():
        for g, curve in by_type.items():
            for n, v in curve.items():
                if v > 0:
                    alone.setdefault((key, n), {})[g] = v
    return ProfiledWorkload(specs, CatalogueThroughputs(alone), curves)
