"""Reading expert-load files and reporting plan quality (shared by the CLI and benchmarks).

WHY a boundary module: bad input (missing file, malformed JSON, ragged or negative counts) is
refused here with a message naming the file and field, before it reaches the planners.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.planner import (
    Loads,
    Placement,
    default_slots,
    max_over_mean,
    plan_for_regime,
    plan_lina,
    plan_uniform,
    regime_step_times,
)

ALGORITHMS = ("lina", "eplb-global", "eplb-hierarchical")


class LoadFileError(ValueError):
    """The load file cannot be used; the message names the file and the field."""


def read_load_file(path: str | Path) -> tuple[Loads, list[int]]:
    """Loads [moe_layers, experts] and the original indices of those layers.

    Layers whose counts are all zero (dense layers, e.g. DeepSeek-V3's first three) carry no
    expert traffic and are left out of planning and of the reported means.
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise LoadFileError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LoadFileError(f"{p}: cannot read ({e})") from None
    except json.JSONDecodeError as e:
        raise LoadFileError(f"{p}: malformed JSON ({e})") from None
    if not isinstance(raw, dict) or "logical_count" not in raw:
        raise LoadFileError(
            f'{p}: missing field "logical_count" (want {{"logical_count": [[...]]}})'
        )
    rows = raw["logical_count"]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise LoadFileError(f'{p}: "logical_count" must be a non-empty list of per-layer lists')
    widths = {len(r) for r in rows}
    if len(widths) != 1 or 0 in widths:
        raise LoadFileError(f'{p}: "logical_count" rows differ in length: {sorted(widths)}')
    try:
        arr = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise LoadFileError(f'{p}: "logical_count" must hold numbers only') from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise LoadFileError(f'{p}: "logical_count" must be finite and non-negative')
    keep = [int(i) for i in np.flatnonzero(arr.sum(1) > 0)]
    if not keep:
        raise LoadFileError(f'{p}: "logical_count" is all zeros (no expert traffic)')
    return arr[keep], keep


def planner_for(
    algorithm: str,
    gpus: int,
    replicas: int,
    slots: int | None,
    groups: int,
    nodes: int,
    regime: tuple[tuple[float, float], ...] | None = None,
    cost: ExpertCost | None = None,
) -> Callable[[Loads], Placement]:
    """The planning function for an algorithm name (imports EPLB's torch only when used).
    ``lina`` with a batch ``regime`` and an expert ``cost`` is the plan for that regime
    (``plan_for_regime``, what the live service runs); without, Lina's token balance."""
    if algorithm == "lina":
        if regime is not None and cost is not None:
            return lambda load: plan_for_regime(load, replicas, gpus, regime, cost, slots)
        return lambda load: plan_lina(load, replicas, gpus, slots)
    if algorithm in ("eplb-global", "eplb-hierarchical"):
        from lyra_ray.moe_serving.eplb import plan_eplb

        g, n = (1, 1) if algorithm == "eplb-global" else (groups, nodes)
        return lambda load: plan_eplb(load, replicas, gpus, g, n)
    raise ValueError(f"unknown algorithm {algorithm!r}; choose from {ALGORITHMS}")


def timed_plan(
    fn: Callable[[Loads], Placement], load: Loads, repeats: int = 1
) -> tuple[Placement, float]:
    """Plan ``repeats`` times; return the placement and the fastest wall time in seconds."""
    best, plan = float("inf"), None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        plan = fn(load)
        best = min(best, time.perf_counter() - t0)
    assert plan is not None
    return plan, best


def report(load: Loads, layers: list[int], plan: Placement, plan_s: float) -> dict[str, Any]:
    """The JSON the CLI writes: per-layer and aggregate max/mean device load, plan time."""
    mom = max_over_mean(load, plan)
    return {
        "max_over_mean": float(np.nanmean(mom)),
        "max_over_mean_worst": float(np.nanmax(mom)),
        "per_layer": [
            {"layer": layer, "max_over_mean": float(v)}
            for layer, v in zip(layers, mom, strict=True)
        ],
        "plan_s": plan_s,
        "moe_layers": len(layers),
        "experts": int(load.shape[1]),
        "devices": plan.devices,
        "replicas": int(plan.replica_expert.shape[1]),
        "slots_per_device": plan.slots,
    }


def predicted(
    load: Loads,
    plan: Placement,
    replicas: int,
    regime: tuple[tuple[float, float], ...],
    cost: ExpertCost,
) -> dict[str, Any]:
    """Predicted expert step time (summed over the MoE layers) of the plan, of uniform
    placement (one replica per expert, round-robin) and of Lina's token balance on the
    whole budget, for the regime: what the CLI reports when it is given one."""
    layers, experts = load.shape
    devices, slots = plan.devices, plan.slots
    base = {"token_balance": plan_lina(load, replicas, devices, slots)}
    if -(-experts // devices) <= slots:
        one = plan_uniform(experts, layers, experts, devices, slots)
        base["uniform"] = Placement(one.replica_expert, one.replica_device, devices, slots, load)
    out: dict[str, Any] = {"plan_s": float(regime_step_times(plan, regime, cost, load).sum())}
    for name, p in base.items():
        out[f"{name}_s"] = float(regime_step_times(p, regime, cost, load).sum())
    out["regime"] = [list(r) for r in regime]
    out["expert"] = {"dim": cost.dim, "hidden": cost.hidden, "gpu": cost.gpu}
    return out


def check_budget(experts: int, gpus: int, replicas: int, slots: int | None) -> str | None:
    """A message naming the bad field, or None if the budget is feasible."""
    if gpus < 1:
        return f"--gpus must be >= 1 (got {gpus})"
    if replicas < experts:
        return f"--replicas ({replicas}) must be >= the number of experts ({experts})"
    s = default_slots(replicas, gpus) if slots is None else slots
    if s < 1:
        return f"--slots must be >= 1 (got {s})"
    if replicas > gpus * s:
        return f"--replicas ({replicas}) do not fit --gpus x --slots ({gpus} x {s} = {gpus * s})"
    return None
