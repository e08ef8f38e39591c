"""ElasticFlow's throughput tables: iterations/s of a model on 1-64 GPUs of one type.

ElasticFlow (ASPLOS'23, pkusys/ElasticFlow) ships ``throughputs_<TYPE>/<model>.csv``:
a header ``global_batch_size,1,2,4,...`` (worker counts), then one row per global batch
size with the iterations/s measured at each count. A cell that is empty, ``nan`` or 0
is a count ElasticFlow did not (or could not) run; it is *not measured*, and the
model cannot run at that count. Any other cell must be a finite number >= 0.

:class:`SpeedTable` answers steps/s at any global batch and worker count:

* at a batch the table measured, its row; at another batch, the samples/s of the row
  with the largest measured batch not above it (the smallest row if none is), so
  ``it/s(B) = it/s(row) * row / B`` — a larger batch only raises samples/s, so this
  errs on the slow side;
* between two measured counts, samples/s interpolated linearly in the count (as
  :mod:`lyra_ray.model.scaling` does for Pollux's curves); past the largest measured
  count of the row, not runnable (0).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lyra_ray.model.errors import InputError, read_text_input

TABLE_PREFIX = "throughputs_"


@dataclass(frozen=True)
class SpeedTable:
    """One model on one GPU type: ``rows[batch][workers]`` = iterations/s measured."""

    model: str
    gpu_type: str
    rows: Mapping[int, Mapping[int, float]]

    def _row(self, batch: int) -> int:
        below = [b for b in self.rows if b <= batch]
        return max(below) if below else min(self.rows)

    def largest_batch(self) -> int:
        return max(self.rows)

    def samples_per_s(self, batch: int, workers: int) -> float:
        """Samples/s at ``workers`` (0 where not measured or past the last count)."""
        row_b = self._row(batch)
        row = self.rows[row_b]
        if workers in row:
            return row[workers] * row_b
        counts = sorted(row)
        if not counts or workers < 1 or workers > counts[-1]:
            return 0.0
        if workers < counts[0]:
            return row[counts[0]] * row_b * workers / counts[0]
        lo = max(c for c in counts if c < workers)
        hi = min(c for c in counts if c > workers)
        a, b = row[lo] * row_b, row[hi] * row_b
        return a + (b - a) * (workers - lo) / (hi - lo)

    def step_rate(self, batch: int, workers: int) -> float:
        """Iterations/s of ``workers`` GPUs at global ``batch`` (see the module doc)."""
        return self.samples_per_s(batch, workers) / batch


def read_table(path: str | Path, gpu_type: str) -> SpeedTable:
    """One ``<model>.csv``; errors name the file, the line and the field."""
    p = Path(path)
    lines = read_text_input(p, "throughput table").splitlines()
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header or header[0].strip() != "global_batch_size" or len(header) < 2:
        raise InputError(f"{p}:1: header must be 'global_batch_size,<workers>,...', got {header!r}")
    counts: list[int] = []
    for cell in header[1:]:
        text = cell.strip()
        if not text.isdigit() or int(text) < 1:
            raise InputError(f"{p}:1: field {cell!r}: a worker count must be a whole number >= 1")
        counts.append(int(text))
    if len(set(counts)) != len(counts):
        raise InputError(f"{p}:1: a worker count is given twice")
    rows: dict[int, dict[int, float]] = {}
    for ln, row in enumerate(reader, 2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) > len(counts) + 1:
            raise InputError(f"{p}:{ln}: {len(row)} fields, the header has {len(counts) + 1}")
        b_raw = row[0].strip()
        if not b_raw.isdigit() or int(b_raw) < 1:
            raise InputError(
                f"{p}:{ln}: field 'global_batch_size': must be a whole number >= 1, got {row[0]!r}"
            )
        batch = int(b_raw)
        if batch in rows:
            raise InputError(f"{p}:{ln}: field 'global_batch_size': {batch} given twice")
        measured: dict[int, float] = {}
        for n, cell in zip(counts, row[1:], strict=False):
            text = cell.strip()
            if not text or text.lower() == "nan":
                continue  # not measured
            try:
                v = float(text)
            except ValueError:
                raise InputError(f"{p}:{ln}: field '{n}': not a number: {cell!r}") from None
            if not math.isfinite(v) or v < 0:
                raise InputError(
                    f"{p}:{ln}: field '{n}': must be a finite number >= 0, got {cell!r}"
                )
            if v > 0:
                measured[n] = v
        rows[batch] = measured
    if not any(rows.values()):
        raise InputError(f"{p}: no measured throughput")
    return SpeedTable(p.stem, gpu_type, {b: r for b, r in rows.items() if r})


def read_tables(directory: str | Path) -> dict[str, dict[str, SpeedTable]]:
    """Every ``throughputs_<TYPE>/<model>.csv`` under ``directory``: type -> model -> table.

    The GPU type is the folder's suffix, lower-cased (``throughputs_A100`` -> ``a100``)."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{d}: not a directory of {TABLE_PREFIX}<TYPE>/<model>.csv tables")
    out: dict[str, dict[str, SpeedTable]] = {}
    for sub in sorted(d.iterdir()):
        if not sub.is_dir() or not sub.name.startswith(TABLE_PREFIX):
            continue
        gpu = sub.name[len(TABLE_PREFIX) :].lower()
        if not gpu:
            raise InputError(f"{sub}: folder name must be {TABLE_PREFIX}<GPU type>")
        for f in sorted(sub.glob("*.csv")):
            out.setdefault(gpu, {})[f.stem] = read_table(f, gpu)
    if not out:
        raise InputError(f"{d}: no {TABLE_PREFIX}<TYPE>/<model>.csv tables")
    return out
