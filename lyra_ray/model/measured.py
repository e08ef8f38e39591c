"""Throughput tables measured on real GPUs, shipped with the project.

Why a module of its own: every number the policies rest on must say where it came from.
The workload catalogue (:mod:`lyra_ray.model.catalogue`) is estimates; the tables here are
measurements, copied into the package (``lyra_ray/model/data/``) so the project runs
without ``../shared``, each with its provenance inside the file.

The files are Gavel's throughput JSON (``{gpu: {"(job, sf)": {"null": alone,
"(partner, sf)": [this, partner]}}}``) with the optional top-level keys that
:func:`lyra_ray.model.throughput.load_gavel_throughputs` accepts: ``provenance``,
``spread`` (the relative spread of each figure) and ``predicted``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from importlib import resources
from typing import Any

H200_FILE = "h200_throughputs.json"
"""Made from ``../shared/data/gpu/h200.json`` by ``scripts/import_h200.py``."""


def job_key(name: str, scale_factor: int = 1) -> str:
    """Gavel's key of a job: ``str((name, scale_factor))``."""
    return str((name, scale_factor))


def h200_table(raw: Mapping[str, Any], gpu: str = "h200") -> dict[str, Any]:
    """Gavel-format table from the H200 measurement file's ``alone_steps_per_s`` and
    ``pairs``.

    Alone: the file's ``median`` (the first, cold pass left out, as its README says);
    spread: (max - min) / median of the warm passes. A pair: the mean of its two runs
    per side; spread: |run 1 - run 2| / mean. A pair measured as (a, b) is entered
    under both jobs, as Gavel's files do, so a lookup never depends on the order.
    """
    alone = raw["alone_steps_per_s"]
    rows: dict[str, dict[str, Any]] = {}
    spread: dict[str, dict[str, Any]] = {}
    for name, rate in alone["median"].items():
        warm = [float(x) for x in alone["passes"][name][1:]]
        med = float(rate)
        rows[job_key(name)] = {"null": med}
        spread[job_key(name)] = {"null": round((max(warm) - min(warm)) / med, 4)}
    for p in raw["pairs"]:
        a, b = str(p["a"]), str(p["b"])
        ra = [float(x) for x in p["steps_per_s_a"]]
        rb = [float(x) for x in p["steps_per_s_b"]]
        ma, mb = statistics.fmean(ra), statistics.fmean(rb)
        sa = abs(ra[0] - ra[-1]) / ma if ma > 0 else 0.0
        sb = abs(rb[0] - rb[-1]) / mb if mb > 0 else 0.0
        rows[job_key(a)][job_key(b)] = [round(ma, 3), round(mb, 3)]
        spread[job_key(a)][job_key(b)] = [round(sa, 4), round(sb, 4)]
        if a != b:
            rows[job_key(b)][job_key(a)] = [round(mb, 3), round(ma, 3)]
            spread[job_key(b)][job_key(a)] = [round(sb, 4), round(sa, 4)]
    return {
        gpu: rows,
        "spread": {gpu: spread},
        "predicted": [],
        "provenance": {
            "source": "measured",
            "gpu": raw.get("gpu"),
            "measured": raw.get("measured"),
            "jobs": raw.get("jobs"),
            "method": (
                "alone: median of four warm 3-s windows (the cold first one left out); "
                "pairs: both jobs stepping at once in two processes on one GPU (plain "
                "time-slicing), mean of two runs per side"
            ),
        },
    }


def load_packaged(name: str) -> dict[str, Any]:
    """A table shipped in ``lyra_ray/model/data/`` (read from this package only)."""
    text = resources.files("lyra_ray.model").joinpath("data", name).read_text()
    data: dict[str, Any] = json.loads(text)
    return data
