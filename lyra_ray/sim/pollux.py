"""Pollux's applications: step times and total work from their measured profiles.

Pollux (OSDI'21) ships, per application, the profiles its simulator replays
(``profiles/<model>/``): ``placements.csv`` and ``scalability.csv`` (step and
all-reduce time against the placement and the local batch, measured on nodes of four
T4s) and ``validation-<batch>.csv`` (per epoch: progress, iterations and the gradient
statistics behind statistical efficiency). This module reads them and answers the two
questions a trace replay asks about a job of a given application, global batch size and
worker count, following Pollux's own simulator, ``simulator/applications.py`` and
``simulator/simulator.py`` of petuum/adaptdl on its ``osdi21-artifact`` branch (commit
c793c708), so that our jobs are the jobs Pollux replays:

* **How fast** (:meth:`Application.step_rate`): a job of ``n`` replicas on consolidated
  four-GPU nodes splits its batch as Pollux's ``Job.update_local_bsz`` does (gradient
  accumulation past the largest measured local batch, and at least one accumulation
  step on one replica with a batch above the initial one), and one optimiser step takes
  ``step + accum_steps * (step - sync)`` at the atomic batch, the step and sync times
  interpolated as ``Application.get_throughput`` does (linearly in the local batch for
  a measured placement, else linearly over (nodes, replicas, local batch) across both
  files).
* **How much** (:meth:`Application.total_steps`): the workloads carry no duration. In
  Pollux's simulator a job completes when its *progress* reaches
  ``get_progress(max_epochs)`` (the smallest progress any validated batch size reached
  after its last epoch); progress grows per step by the statistical-efficiency gain
  ``(var + sqr) / (var / scale + sqr)`` of the job's batch (``scale`` = batch over the
  initial batch), with the gradient statistics of the current epoch interpolated
  between validated batch sizes. A job that keeps its batch therefore needs, per epoch,
  the epoch's progress over its gain in steps; the sum is its total work.

Pollux's per-application settings (``APPLICATIONS`` at the end of its
``applications.py``) are :data:`POLLUX_SETTINGS`; an application it does not list (a Sia
workload's) takes Pollux's defaults: every epoch its validation files hold, and the
local batch range its placements measured.

Bad input is refused with one line naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError, read_text_input

GPUS_PER_PROFILE_NODE = 4
"""Pollux's profiles were measured on nodes of four T4s (AWS g4dn.12xlarge); its
simulator places a job's replicas four to a node (``get_configurations``)."""
PROFILE_GPU = "t4"
"""The GPU type Pollux's profiles were measured on."""
MAX_PROFILE_NODES = 16
"""Pollux's interpolation caps the node count at 16 (``min(num_nodes, 16)``)."""
POLLUX_SETTINGS: Mapping[str, Mapping[str, int]] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}
"""``APPLICATIONS`` of Pollux's ``simulator/applications.py`` (osdi21-artifact)."""


def _rows(path: Path, need: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """``(line, row)`` of a CSV whose header holds ``need``; errors name file and line."""
    text = read_text_input(path, "profile")
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(need) <= set(reader.fieldnames):
        raise InputError(f"{path}:1: header must contain {', '.join(need)}")
    return [
        (ln, row)
        for ln, row in enumerate(reader, 2)
        if any((v or "").strip() for v in row.values())
    ]


def _float(path: Path, line: int, name: str, raw: str | None, lo: float = 0.0) -> float:
    if raw is None or not raw.strip():
        raise InputError(f"{path}:{line}: field '{name}': missing")
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"{path}:{line}: field '{name}': not a number: {raw!r}") from None
    if not math.isfinite(v) or v < lo:
        raise InputError(
            f"{path}:{line}: field '{name}': must be a finite number >= {lo:g}, got {raw!r}"
        )
    return v


def _int(path: Path, line: int, name: str, raw: str | None, lo: int = 1) -> int:
    v = _float(path, line, name, raw, lo)
    if v != int(v):
        raise InputError(f"{path}:{line}: field '{name}': not a whole number: {raw!r}")
    return int(v)


@dataclass(frozen=True)
class Epoch:
    """One row of a validation file: after this epoch, at this batch size."""

    progress: float
    iteration: float
    grad_sqr: float
    grad_var: float


@dataclass
class Application:
    """One application's profiles, as Pollux's simulator reads them."""

    name: str
    validation: dict[int, list[Epoch]]
    placements: dict[tuple[int, ...], list[tuple[float, float, float]]]
    """Normalised placement -> sorted ``(local_bsz, step_time, sync_time)``."""
    points: list[tuple[float, float, float, float, float]]
    """``(nodes, replicas, local_bsz, step_time, sync_time)``: the placements averaged per
    (nodes, replicas, local batch), then the scalability rows, as Pollux interpolates."""
    min_local_bsz: int
    max_local_bsz: int
    max_epochs: int
    init_batch_size: int = field(init=False)
    max_batch_size: int = field(init=False)
    _interp: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.init_batch_size = min(self.validation)
        self.max_batch_size = max(self.validation)

    # ------------------------------------------------------------------ speed

    def batch_split(self, batch: int, replicas: int) -> tuple[int, int]:
        """``(atomic_bsz, accum_steps)`` of ``replicas`` workers at global ``batch``
        (Pollux's ``Job.update_local_bsz`` with a target batch size)."""
        local = math.ceil(batch / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        count = replicas * (accum + 1)
        return min(atomic, int(self.max_batch_size / count)), accum

    def step_rate(self, batch: int, replicas: int) -> float:
        """Optimiser steps/s of ``replicas`` workers (four to a node) at global
        ``batch``; 0 where the profiles cannot say (a local batch below the smallest
        measured, or outside what was interpolated)."""
        if replicas < 1:
            return 0.0
        atomic, accum = self.batch_split(batch, replicas)
        if atomic < self.min_local_bsz:
            return 0.0
        full, rest = divmod(replicas, GPUS_PER_PROFILE_NODE)
        placement = (GPUS_PER_PROFILE_NODE,) * full + ((rest,) if rest else ())
        times = self._times(placement, atomic)
        if times is None:
            return 0.0
        step, sync = times
        total = step + accum * (step - sync)
        return 1.0 / total if total > 0 else 0.0

    def _times(self, placement: tuple[int, ...], local: float) -> tuple[float, float] | None:
        import numpy as np

        key = min(placement[i:] + placement[:i] for i in range(len(placement)))
        rows = self.placements.get(key)
        if rows is not None:
            xs = [r[0] for r in rows]
            if not xs[0] <= local <= xs[-1]:
                return None
            return (
                float(np.interp(local, xs, [r[1] for r in rows])),
                float(np.interp(local, xs, [r[2] for r in rows])),
            )
        if self._interp is None:
            from scipy.interpolate import LinearNDInterpolator

            pts = np.array([p[:3] for p in self.points])
            vals = np.array([p[3:] for p in self.points])
            try:
                self._interp = LinearNDInterpolator(pts, vals)
            except Exception:  # too few or flat points (scipy's QhullError): no hull
                self._interp = False
        if self._interp is False:
            return None
        nodes = min(len(placement), MAX_PROFILE_NODES)
        out = self._interp([[nodes, sum(placement), local]])[0]
        if not all(math.isfinite(float(v)) for v in out):
            return None
        return float(out[0]), float(out[1])

    # ------------------------------------------------------------------ work

    def _bracket(self, batch: int) -> tuple[int, int]:
        lower = upper = None
        for b in sorted(self.validation):
            if b <= batch:
                lower = b
            if b >= batch:
                upper = b
                break
        if lower is None or upper is None:
            raise ValueError(
                f"batch size {batch} is outside the validated {min(self.validation)}-"
                f"{max(self.validation)} of {self.name}"
            )
        return lower, upper

    def grad_stats(self, batch: int, epoch: int) -> tuple[float, float]:
        """``(grad_sqr, grad_var)`` during ``epoch``, interpolated in the batch size."""
        lo, hi = self._bracket(batch)
        a, b = self.validation[lo][epoch], self.validation[hi][epoch]
        if lo == hi:
            return a.grad_sqr, a.grad_var
        w = (batch - lo) / (hi - lo)
        return a.grad_sqr + w * (b.grad_sqr - a.grad_sqr), a.grad_var + w * (
            b.grad_var - a.grad_var
        )

    def progress(self, epoch: int) -> float:
        """Pollux's ``get_progress``: the progress every batch size reached by then."""
        if epoch == 0:
            return 0.0
        return min(rows[epoch - 1].progress for rows in self.validation.values())

    def total_steps(self, batch: int) -> float:
        """Optimiser steps at ``batch`` until Pollux's simulator counts the job done."""
        scale = batch / self.init_batch_size
        steps = 0.0
        for e in range(self.max_epochs):
            sqr, var = self.grad_stats(batch, e)
            gain = (var + sqr) / (var / scale + sqr)
            steps += (self.progress(e + 1) - self.progress(e)) / gain
        return steps


def _placement_key(path: Path, line: int, raw: str | None) -> tuple[int, ...]:
    text = (raw or "").strip()
    if not text.isdigit() or "0" in text:
        raise InputError(f"{path}:{line}: field 'placement': expected digits 1-9, got {raw!r}")
    p = tuple(int(c) for c in text)
    return min(p[i:] + p[:i] for i in range(len(p)))


def load_application(directory: str | Path, name: str | None = None) -> Application:
    """One application's profiles from ``directory`` (Pollux's ``traces/<model>/``)."""
    d = Path(directory)
    name = name or d.name
    if not d.is_dir():
        raise InputError(f"{d}: no profile directory for application {name!r}")
    validation: dict[int, list[Epoch]] = {}
    for p in sorted(d.glob("validation-*.csv")):
        try:
            batch = int(p.stem.split("-")[-1])
        except ValueError:
            raise InputError(f"{p}: file name must be validation-<batch size>.csv") from None
        epochs = []
        for ln, row in _rows(p, ("progress", "iteration", "grad_sqr", "grad_var")):
            epochs.append(
                Epoch(
                    _float(p, ln, "progress", row["progress"]),
                    _float(p, ln, "iteration", row["iteration"]),
                    _float(p, ln, "grad_sqr", row["grad_sqr"]),
                    _float(p, ln, "grad_var", row["grad_var"]),
                )
            )
        if not epochs:
            raise InputError(f"{p}: no epochs")
        validation[batch] = epochs
    if not validation:
        raise InputError(f"{d}: no validation-<batch size>.csv files for {name!r}")
    placements: dict[tuple[int, ...], list[tuple[float, float, float]]] = {}
    grouped: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
    pp = d / "placements.csv"
    for ln, row in _rows(pp, ("placement", "local_bsz", "step_time", "sync_time")):
        key = _placement_key(pp, ln, row["placement"])
        bsz = _float(pp, ln, "local_bsz", row["local_bsz"], 1.0)
        step = _float(pp, ln, "step_time", row["step_time"])
        sync = _float(pp, ln, "sync_time", row["sync_time"])
        if step <= 0:
            raise InputError(f"{pp}:{ln}: field 'step_time': must be > 0, got {row['step_time']!r}")
        placements.setdefault(key, []).append((bsz, step, sync))
        grouped.setdefault((len(key), sum(key), bsz), []).append((step, sync))
    if not placements:
        raise InputError(f"{pp}: no measurements")
    for rows in placements.values():
        rows.sort()
    points = [
        (float(n), float(r), b, sum(s for s, _ in v) / len(v), sum(y for _, y in v) / len(v))
        for (n, r, b), v in sorted(grouped.items())
    ]
    sp = d / "scalability.csv"
    if sp.exists():
        for ln, row in _rows(
            sp, ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
        ):
            points.append(
                (
                    float(_int(sp, ln, "num_nodes", row["num_nodes"])),
                    float(_int(sp, ln, "num_replicas", row["num_replicas"])),
                    _float(sp, ln, "local_bsz", row["local_bsz"], 1.0),
                    _float(sp, ln, "step_time", row["step_time"]),
                    _float(sp, ln, "sync_time", row["sync_time"]),
                )
            )
    settings = POLLUX_SETTINGS.get(name, {})
    local = [b for rows in placements.values() for b, _, _ in rows]
    measured = min(len(v) for v in validation.values())
    max_epochs = min(settings.get("max_epochs", measured), measured)
    return Application(
        name=name,
        validation=validation,
        placements=placements,
        points=points,
        min_local_bsz=int(settings.get("min_local_bsz", min(local))),
        max_local_bsz=int(settings.get("max_local_bsz", max(local))),
        max_epochs=max_epochs,
    )


@dataclass(frozen=True)
class WorkloadJob:
    """One row of a Pollux/Sia workload."""

    name: str
    arrival_s: float
    application: str
    replicas: int
    batch_size: int
    line: int


WORKLOAD_FIELDS = ("name", "time", "application", "num_replicas", "batch_size")


def read_workload(path: str | Path) -> list[WorkloadJob]:
    """A Pollux/Sia workload (``name,time,application,num_replicas,batch_size``), in
    arrival order (the first job's ``time`` is the start); extra columns are ignored."""
    p = Path(path)
    text = read_text_input(p, "trace")
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(WORKLOAD_FIELDS) <= set(reader.fieldnames):
        raise InputError(f"{p}:1: header must contain {','.join(WORKLOAD_FIELDS)}")
    out: list[WorkloadJob] = []
    for ln, row in enumerate(reader, 2):
        if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
            continue
        name = (row["name"] or "").strip()
        if not name:
            raise InputError(f"{p}:{ln}: field 'name': empty")
        app = (row["application"] or "").strip()
        if not app:
            raise InputError(f"{p}:{ln}: field 'application': empty")
        out.append(
            WorkloadJob(
                name=name,
                arrival_s=_float(p, ln, "time", row["time"]),
                application=app,
                replicas=_int(p, ln, "num_replicas", row["num_replicas"]),
                batch_size=_int(p, ln, "batch_size", row["batch_size"]),
                line=ln,
            )
        )
    out.sort(key=lambda j: (j.arrival_s, j.line))
    return out


def find_profiles(trace: str | Path) -> Path | None:
    """Pollux's layout: ``profiles/`` beside the workload's folder (or the workload)."""
    t = Path(trace).resolve()
    for d in (t.parent.parent / "profiles", t.parent / "profiles"):
        if d.is_dir():
            return d
    return None
