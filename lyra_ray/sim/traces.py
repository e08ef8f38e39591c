"""Trace readers: Gavel's ``.trace`` files, Philly-style CSV and the project's YAML job list.

Every reader returns plain :class:`JobSpec` objects in arrival order and refuses a bad
line with a message naming the file, the line and the field.

Philly mapping (documented because the CSV has no job types): each row becomes a rigid
job of ``num_gpus`` workers arriving at ``timestamp - first timestamp``. Its job type is
drawn from the shipped catalogue by a seeded RNG; its per-worker throughput is that
type's; its total steps are chosen so that on the reference GPU type (``v100``) at its
requested size it runs exactly the recorded ``duration`` — the trace's duration is
preserved on the fastest hardware and stretched on slower types.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from lyra_ray.model import JobSpec
from lyra_ray.model.admission import check_bounds
from lyra_ray.model.errors import InputError, read_text_input

GAVEL_FIELDS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
PHILLY_REFERENCE_GPU = "v100"
_GAVEL_NAMES = {"arrival_s": "arrival_time", "min_workers": "scale_factor", "slo_s": "SLO"}
_PHILLY_NAMES = {"total_steps": "duration", "arrival_s": "timestamp", "min_workers": "num_gpus"}


def _num(path: Path, line: int, field: str, raw: str | None, kind: type = float) -> float:
    """A finite number (an integer for ``kind=int``), else an InputError naming the field.

    ``inf`` used to pass (an endless job) or raise OverflowError from ``int()``, and a
    short CSV row's missing cell (``None``) a TypeError: both found by fuzzing.
    """
    if raw is None:
        raise InputError(f"{path}:{line}: field '{field}': missing")
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"{path}:{line}: field '{field}': not a number: {raw!r}") from None
    if not math.isfinite(v):
        raise InputError(f"{path}:{line}: field '{field}': not a finite number: {raw!r}")
    return int(v) if kind is int else v


def read_gavel_trace(
    path: str | Path, known_job_types: Iterable[str] | None = None
) -> list[JobSpec]:
    p = Path(path)
    known = set(known_job_types) if known_job_types is not None else None
    specs: list[JobSpec] = []
    lines = read_text_input(p, "trace").splitlines()
    for ln, text in enumerate(lines, 1):
        if not text.strip():
            continue
        f = text.split("\t")
        if len(f) != len(GAVEL_FIELDS):
            raise InputError(
                f"{p}:{ln}: expected {len(GAVEL_FIELDS)} tab-separated fields "
                f"({', '.join(GAVEL_FIELDS)}), got {len(f)}"
            )
        job_type = f[0].strip()
        if known is not None and job_type not in known:
            raise InputError(f"{p}:{ln}: field 'job_type': unknown job type {job_type!r}")
        steps = _num(p, ln, "total_steps", f[5])
        sf = int(_num(p, ln, "scale_factor", f[6], int))
        weight = _num(p, ln, "priority_weight", f[7])
        slo = _num(p, ln, "SLO", f[8])
        arrival = _num(p, ln, "arrival_time", f[9])
        for name, v, ok in (
            ("total_steps", steps, steps > 0),
            ("scale_factor", sf, sf >= 1),
            ("priority_weight", weight, weight > 0),
            ("arrival_time", arrival, arrival >= 0),
        ):
            if not ok:
                raise InputError(f"{p}:{ln}: field '{name}': out of range: {v}")
        spec = JobSpec(
            name=str(len(specs)),
            total_steps=steps,
            min_workers=sf,
            max_workers=sf,
            priority_weight=weight,
            job_type=job_type,
            slo_s=slo if slo > 0 else None,
            arrival_s=arrival,
        )
        check_bounds(spec, f"{p}:{ln}", _GAVEL_NAMES)
        specs.append(spec)
    return sorted(specs, key=lambda s: s.arrival_s)


def read_philly_csv(
    path: str | Path, seed: int = 0, max_jobs: int | None = None, max_gpus: int | None = None
) -> list[JobSpec]:
    from lyra_ray.model.catalogue import CATALOGUE

    p = Path(path)
    rng = random.Random(seed)
    types = sorted(CATALOGUE)
    try:
        fh = p.open(newline="")
    except OSError as e:
        raise InputError(f"{p}: cannot read trace: {e.strerror}") from None
    with fh:
        try:
            rows = _philly_rows(p, csv.DictReader(fh), max_gpus)
        except UnicodeDecodeError as e:
            raise InputError(f"{p}: cannot read trace: not UTF-8 text ({e.reason})") from None
        except csv.Error as e:
            raise InputError(f"{p}: malformed CSV: {e}") from None
    rows.sort()
    if max_jobs is not None:
        rows = rows[:max_jobs]
    if not rows:
        return []
    t0 = rows[0][0]
    specs = []
    for i, (ts, ln, dur, gpus) in enumerate(rows):
        jt = types[rng.randrange(len(types))]
        per_worker = CATALOGUE[jt]
        ref = per_worker.get(PHILLY_REFERENCE_GPU, max(per_worker.values()))
        spec = JobSpec(
            name=str(i),
            total_steps=dur * ref * gpus,
            min_workers=gpus,
            max_workers=gpus,
            throughput=dict(per_worker),
            arrival_s=ts - t0,
            config={"job_type": jt},
        )
        check_bounds(spec, f"{p}:{ln}", _PHILLY_NAMES)
        specs.append(spec)
    return specs


def _philly_rows(
    p: Path, reader: csv.DictReader[str], max_gpus: int | None
) -> list[tuple[float, int, float, int]]:
    """(timestamp, line, duration, GPUs) of every row that carries training work."""
    rows: list[tuple[float, int, float, int]] = []
    need = {"timestamp", "duration", "num_gpus"}
    if reader.fieldnames is None or not need <= set(reader.fieldnames):
        raise InputError(f"{p}:1: header must contain {sorted(need)}")
    for ln, row in enumerate(reader, 2):
        try:
            ts = datetime.fromisoformat(row["timestamp"]).timestamp()
        except (TypeError, ValueError, OverflowError, OSError):
            raise InputError(
                f"{p}:{ln}: field 'timestamp': not a date: {row['timestamp']!r}"
            ) from None
        dur = _num(p, ln, "duration", row["duration"])
        gpus = int(_num(p, ln, "num_gpus", row["num_gpus"], int))
        if dur <= 0 or gpus < 1:
            continue  # Philly logs failed/zero-GPU jobs; they carry no training work
        if max_gpus is not None and gpus > max_gpus:
            continue
        rows.append((ts, ln, dur, gpus))
    return rows


def read_yaml_jobs(path: str | Path, **known: object) -> list[JobSpec]:
    from lyra_ray.model.spec import load_job_file  # pydantic and YAML: job files only

    return sorted(load_job_file(path, **known), key=lambda s: s.arrival_s)
