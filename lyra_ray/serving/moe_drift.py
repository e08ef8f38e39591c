"""When the live MoE service re-plans on routing drift: Lina's phase 2 with hysteresis.

WHY a gate in front of phase 2: the service checks the routing it saw every ``replan_s``
seconds. A window of a few seconds of traffic is noisy: the shares of small experts move by
several points between windows even when the traffic's topic mix holds still, and Lina's
phase-2 test (a layer's L1 share deviation past ``threshold``) alone would then move replicas
back and forth, each move costing a weight load on every device and a routing-table switch.
Two conditions must both hold before a re-plan is applied:

- **it pays**: on the window just seen, the candidate plan's bottleneck is lower than the
  plan in use's by more than ``min_gain`` (a fraction). The bottleneck is the service's
  own objective: with a planner for the batch regime, the predicted expert step time over
  that regime under the window's loads (``Phase2Planner``); without one, the sum over
  layers of the busiest replica's tokens;
- **it persists**: that was so at ``checks`` consecutive checks. One noisy window, or a
  burst that ends, resets the streak; a real shift in the topic mix passes within
  ``checks`` windows (``checks * replan_s`` seconds plus the window the shift fell in).

The candidate is Lina's own phase 2: only layers whose shares moved past ``threshold`` take
the window's loads; the others keep the loads they were planned for (``planner.replan``
without a ``Phase2Planner``; with one, the whole plan is made again from those loads, so a
layer whose estimate held gets the plan it had, its loads and the regime unchanged).

Pure numpy: no Ray, no clock; the service passes the window's counts in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.planner import Placement, deviation, replan

Loads = npt.NDArray[np.float64]


def busiest_replica(window: Loads, plan: Placement) -> Loads:
    """Per layer, the busiest replica's tokens when ``window`` [L, E] runs on ``plan``
    (an expert's tokens split evenly over its replicas)."""
    out: Loads = (window / np.maximum(plan.counts, 1)).max(1)
    return out


def replica_imbalance(window: Loads, plan: Placement) -> float:
    """Max over layers of busiest replica / mean replica load (1.0 = perfectly even)."""
    budget = plan.replica_expert.shape[1]
    mean = window.sum(1) / budget
    busy = busiest_replica(window, plan)
    live = mean > 0
    return float((busy[live] / mean[live]).max()) if live.any() else 1.0


@dataclass(frozen=True)
class DriftCheck:
    """One phase-2 check, as the service reports it (``plan()['checks']``)."""

    check: int
    """Sequence number of this check (the service's own clock: one per ``replan_s``)."""
    imbalance: float
    """The plan in use on this window: busiest replica / mean replica (max over layers)."""
    best: float
    """The same for a fresh plan of this window by the service's planner on the same
    devices: the planner's own figure, what no re-plan can beat."""
    gain: float
    """Bottleneck of the plan in use / the candidate's, minus 1 (0: nothing to gain)."""
    layers: tuple[int, ...]
    """The layers the candidate re-plans (shares moved past ``threshold``)."""
    streak: int
    replan: bool


@dataclass(frozen=True)
class Phase2Planner:
    """The service's planner and objective, for phase 2 to plan and judge with the same
    ones as phase 1 (the plan for the batch regime and its predicted step time)."""

    plan: Callable[[Loads, int, int], Placement]
    """``(loads [L, E], devices, slots) -> placement`` for the regime seen."""
    cost: Callable[[Placement, Loads], float]
    """Predicted step time of a placement under loads [L, E] (lower is better)."""


class DriftGate:
    """Decides, check by check, whether phase 2's candidate is applied (see module doc)."""

    def __init__(
        self, threshold: float, min_gain: float, checks: int, planner: Phase2Planner | None = None
    ) -> None:
        if checks < 1:
            raise ValueError(f"checks: must be >= 1, got {checks}")
        if min_gain < 0:
            raise ValueError(f"min_gain: must be >= 0, got {min_gain}")
        self.threshold, self.min_gain, self.checks = threshold, min_gain, checks
        self.planner = planner
        self.count = 0
        self.streak = 0

    def _candidate(self, plan: Placement, window: Loads) -> tuple[Placement, list[int]]:
        if self.planner is None:
            return replan(plan, window, self.threshold)
        bad = [int(i) for i in np.flatnonzero(deviation(plan, window) > self.threshold)]
        if not bad:
            return plan, []
        loads = plan.planned_load.copy()
        loads[bad] = window[bad]
        return self.planner.plan(loads, plan.devices, plan.slots), bad

    def _fresh(self, plan: Placement, window: Loads) -> Placement:
        """The planner's own plan of this very window (what no re-plan can beat)."""
        from lyra_ray.moe_serving.planner import plan_lina

        load = np.where(window.sum(1, keepdims=True) > 0, window, 1.0)
        if self.planner is not None:
            return self.planner.plan(load, plan.devices, plan.slots)
        return plan_lina(load, plan.replica_expert.shape[1], plan.devices, plan.slots)

    def _bottleneck(self, plan: Placement, window: Loads) -> float:
        if self.planner is not None:
            return self.planner.cost(plan, window)
        return float(busiest_replica(window, plan).sum())

    def check(self, plan: Placement, window: Loads) -> tuple[DriftCheck, Placement | None]:
        """Judge one window; returns the check and the placement to apply (None: keep)."""
        self.count += 1
        window = np.asarray(window, dtype=np.float64)
        candidate, layers = self._candidate(plan, window)
        now = self._bottleneck(plan, window)
        then = self._bottleneck(candidate, window)
        gain = now / then - 1.0 if then > 0 else 0.0
        pays = bool(layers) and gain > self.min_gain
        self.streak = self.streak + 1 if pays else 0
        apply = self.streak >= self.checks
        if apply:
            self.streak = 0
        fresh = self._fresh(plan, window)
        result = DriftCheck(
            check=self.count,
            imbalance=replica_imbalance(window, plan),
            best=replica_imbalance(window, fresh),
            gain=gain,
            layers=tuple(layers),
            streak=self.streak,
            replan=apply,
        )
        return result, candidate if apply else None
