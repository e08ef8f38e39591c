"""What an hour of a machine costs: public on-demand list prices, shipped with the project.

Why a table of its own: the autoscaler's budget (:mod:`lyra_ray.autoscale`) prices a
node by its instance type, and Gavel's cost policies (``..._normalized_by_cost_perf``)
price a GPU-hour by GPU type; both must read the same figures, and each figure must say
where and when it was taken (``data/prices.json``: its ``provenance``). A cluster's own
rates go in the ``lyra:`` section (``autoscale.prices``), over these.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from lyra_ray.model.types import GpuType

PRICES_FILE = "prices.json"


@cache
def _table() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(
        resources.files("lyra_ray.model").joinpath("data", PRICES_FILE).read_text()
    )
    return raw


def provenance() -> dict[str, str]:
    """Where each price comes from, and when it was read."""
    return dict(_table()["provenance"])


def instance_prices() -> dict[str, float]:
    """USD per instance-hour by cloud instance type (``p4d.24xlarge``: 32.7726)."""
    return {k: float(v["usd_per_hour"]) for k, v in _table()["instances"].items()}


def instance_gpus(instance: str) -> tuple[GpuType | None, int] | None:
    """(GPU type, GPUs) of a listed instance type, or None when it is not listed."""
    row = _table()["instances"].get(instance)
    return None if row is None else (row["gpu"], int(row["gpus"]))


def gpu_hour_prices() -> dict[GpuType, float]:
    """USD per GPU-hour by GPU type: what Gavel's cost policies divide throughput by."""
    return {k: float(v["usd"]) for k, v in _table()["per_gpu_hour"].items()}
