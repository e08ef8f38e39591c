"""What the MoE service's expert plans are made from: the loads and the cost model.

WHY apart from the ingress (:mod:`lyra_ray.serving.moe_app`): the ingress owns the
servers, the routing tables and the device handles, which change with every lend and
reclaim; this object owns what a plan is computed from, which outlives every table:

- Lina's phase-1 estimate (the calibrated routers' counts on a seeded stream shaped like
  the spec's requests), until real routing has been seen;
- the routed tokens per expert: the window since the last phase-2 check, and a decayed
  sum of recent windows that phase-1 re-plans (lend, reclaim) plan for;
- the batch regime the service sees (:class:`BatchHistogram`);
- the devices' expert time (emulated, or measured on the first device);
- the phase-2 drift gate and its checks.

It makes no Ray call: the ingress feeds it what requests routed, and asks it for
placements.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from lyra_ray.moe_serving.batch_regime import BatchHistogram
from lyra_ray.serving.moe_device import device_service_ms, emulated_expert
from lyra_ray.serving.moe_drift import DriftCheck, DriftGate, Phase2Planner
from lyra_ray.serving.moe_plan import plan_devices


class ExpertLoads:
    """The loads, batch regime and expert time of one MoE service (``model``: its
    :class:`~lyra_ray.moe_serving.hf_moe.HFMoE`; ``knobs``: its spec's MoE knobs)."""

    def __init__(self, model: Any, knobs: dict[str, Any]) -> None:
        self.model = model
        self.batch, self.seq = int(knobs["batch"]), int(knobs["seq"])
        self.estimate = model.pick_shares(self.profile_stream())
        """Phase 1's estimate: the calibrated routers' counts on a seeded stream of requests
        shaped like the spec's, until real routing is seen."""
        self.cost = _static_cost(knobs, model)
        """The devices' expert time, what plans predict step times with (None until the
        first device has been profiled, when the calls are not emulated)."""
        self.batches = BatchHistogram(prior=float(self.batch * self.seq * model.top_k))
        """Routed tokens per MoE layer of each request: the batch regime plans are made for."""
        self.drift = DriftGate(
            float(knobs["threshold"]),
            float(knobs["replan_gain"]),
            int(knobs["replan_checks"]),
            Phase2Planner(self.plan_for, self.predicted),
        )
        self.checks: list[dict[str, Any]] = []
        self.window = np.zeros((model.layers, model.experts))
        """Tokens per expert since the last phase-2 check."""
        self.recent = np.zeros_like(self.window)
        """Tokens per expert, halved at every phase-2 check: what a re-plan plans for."""

    def profile_stream(self) -> Any:
        """Requests of the spec's shape with a Dirichlet topic mix each (seeded)."""
        from lyra_ray.moe_serving.workload import sample_batch

        m = self.model
        rng = np.random.default_rng(m.spec.seed + 100)
        mixes = [rng.dirichlet(np.full(m.topics, 0.5)) for _ in range(16)]
        return np.concatenate(
            [sample_batch(m, rng, self.batch, self.seq, mix).numpy() for mix in mixes]
        )

    # ---------------------------------------------------------------- what requests did

    def request(self, tokens: int) -> None:
        """A request of ``tokens`` tokens begins: its routed tokens per MoE layer."""
        self.batches.observe(float(tokens * self.model.top_k))

    def routed(self, layer: int, counts: Any) -> None:
        """A request's tokens per expert at ``layer``."""
        self.window[layer] += counts
        self.recent[layer] += counts

    # ---------------------------------------------------------------- plans

    def plan_for(self, load: Any, devices: int, slots: int) -> Any:
        """The plan for the batch regime seen so far, under the devices' expert time."""
        return plan_devices(load, devices, slots, self.batches.regime(), self.cost)

    def predicted(self, placement: Any, load: Any) -> float:
        """Predicted expert step time of ``placement`` under ``load`` (summed over layers)."""
        from lyra_ray.moe_serving.planner import regime_step_times

        flat = np.where(load.sum(1, keepdims=True) > 0, load, 1.0)
        return float(regime_step_times(placement, self.batches.regime(), self.cost, flat).sum())

    def phase1(self, devices: int, slots: int, uniform: bool) -> Any:
        """Phase 1's placement onto ``devices``: for the load seen lately (the estimate
        before any), or every expert alike when ``uniform``."""
        if uniform:
            return plan_devices(np.ones_like(self.estimate), devices, slots)
        load = self.recent if self.recent.sum() > 0 else self.estimate
        return self.plan_for(load, devices, slots)

    def check(self, placement: Any | None) -> tuple[DriftCheck | None, Any | None]:
        """Close the window and judge it: (the check, or None when nothing was judged;
        phase 2's placement if the routing drifted from ``placement``, the plan in use;
        None for ``placement``: no plan, or one that never re-plans)."""
        actual, self.window = self.window, np.zeros_like(self.window)
        self.recent *= 0.5
        if placement is None or actual.sum() == 0:
            return None, None
        check, drifted = self.drift.check(placement, actual)
        self.checks.append({"at": time.time(), **check.__dict__, "layers": list(check.layers)})
        return check, drifted


def _static_cost(knobs: dict[str, Any], model: Any) -> Any:
    """The expert time of emulated calls (``service_ms`` or ``emulate``); None when the
    devices compute, whose time is measured on the first device."""
    from lyra_ray.moe_serving.expert_time import ExpertCost, per_call

    service_ms = device_service_ms(knobs)
    if service_ms is not None:
        return ExpertCost(model.dim, model.inter, constants=per_call(max(service_ms, 1e-3) / 1e3))
    return emulated_expert(knobs, model.dim, model.inter)
