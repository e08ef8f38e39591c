"""Lina's two-phase expert-replica planner, and the placement type every planner returns.

Phase 1 (ahead of time, from *estimated* loads): replica counts by the divisor method within
the replica budget, then packing of replicas onto devices (longest-first with a slot cap,
then pairwise swaps) so per-device load is balanced. Phase 2 (at serving time, from the
gate's *actual* counts): re-plan only the layers whose actual load shares deviate from the
shares the plan was made for by more than a threshold — re-planning costs replica moves, so
layers whose estimate held keep their replicas.

A replica carries ``load[expert] / count[expert]``; a device's load is the sum over the
replicas it hosts; quality is max/mean device load per layer (1.0 = perfect balance).

That token objective is right when every expert call is compute-bound (prefill-sized
batches). At decode-sized batches an expert's time is flat in its tokens (weight reads and
the launch floor, ``expert_time.py``), so a device's time is about how many distinct expert
replicas it runs, and an extra replica adds a whole call's floor. ``plan_for_batch`` plans
for a given batch size: it minimises the predicted step time (max over devices of the sum of
its replicas' expected expert times) and may leave replica slots unused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lyra_ray.moe_serving.expert_time import ExpertCost
from lyra_ray.moe_serving.packing import apportion, expand, greedy_pack, refine_swaps

Loads = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Placement:
    """Where each layer's replicas live. Row i describes layer i (of the layers planned)."""

    replica_expert: Ints  # [L, R] logical expert of each physical replica
    replica_device: Ints  # [L, R] device hosting each physical replica
    devices: int
    slots: int
    planned_load: Loads  # [L, E] the loads the plan was made for

    @property
    def counts(self) -> Ints:
        """Replicas per expert [L, E]."""
        e = self.planned_load.shape[1]
        return np.stack([np.bincount(r, minlength=e) for r in self.replica_expert])


def check_shape(load: Loads, replicas: int, devices: int, slots: int) -> None:
    """Refuse impossible requests with a message naming the offending field."""
    if load.ndim != 2 or load.shape[1] < 1:
        raise ValueError(f"load must be [layers, experts], got shape {load.shape}")
    if not np.all(np.isfinite(load)) or np.any(load < 0):
        raise ValueError("load must hold finite, non-negative numbers")
    if devices < 1 or slots < 1:
        raise ValueError(f"devices ({devices}) and slots ({slots}) must be >= 1")
    if replicas < load.shape[1]:
        raise ValueError(f"replicas ({replicas}) must be >= experts ({load.shape[1]})")
    if replicas > devices * slots:
        raise ValueError(f"replicas ({replicas}) exceed devices*slots ({devices}*{slots})")


def default_slots(replicas: int, devices: int) -> int:
    """Slots per device when none are given: just enough to hold every replica."""
    return -(-replicas // devices)


def device_loads(load: Loads, plan: Placement) -> Loads:
    """Per-device load [L, G] when ``load`` [L, E] is served by ``plan``."""
    counts = plan.counts
    per_rep = np.take_along_axis(load / np.maximum(counts, 1), plan.replica_expert, axis=1)
    out = np.zeros((load.shape[0], plan.devices))
    for i in range(load.shape[0]):
        out[i] = np.bincount(plan.replica_device[i], weights=per_rep[i], minlength=plan.devices)
    return out


def max_over_mean(load: Loads, plan: Placement) -> Loads:
    """Max/mean device load per layer (nan for a layer with no load)."""
    dl = device_loads(load, plan)
    mean = dl.mean(1)
    out: Loads = np.where(mean > 0, dl.max(1) / np.where(mean > 0, mean, 1.0), np.nan)
    return out


def plan_lina(load: Loads, replicas: int, devices: int, slots: int | None = None) -> Placement:
    """Phase 1: counts by the divisor method, then balanced packing onto devices."""
    slots = default_slots(replicas, devices) if slots is None else slots
    check_shape(load, replicas, devices, slots)
    counts = apportion(load, replicas)
    experts, weights = expand(counts, load)
    device = greedy_pack(weights, devices, slots)
    device = refine_swaps(weights, device, devices, slots)
    return Placement(experts, device, devices, slots, load.astype(np.float64))


def shares(load: Loads) -> Loads:
    tot = load.sum(1, keepdims=True)
    out: Loads = np.where(tot > 0, load / np.where(tot > 0, tot, 1.0), 1.0 / load.shape[1])
    return out


def deviation(plan: Placement, actual: Loads) -> Loads:
    """Per-layer L1 distance between planned and actual load shares (0..2)."""
    out: Loads = np.abs(shares(plan.planned_load) - shares(actual)).sum(1)
    return out


def replan(plan: Placement, actual: Loads, threshold: float = 0.2) -> tuple[Placement, list[int]]:
    """Phase 2: re-plan the layers whose actual loads deviate past ``threshold``.

    Returns the new placement and the layers that changed; other layers keep their replicas.
    """
    bad = [int(i) for i in np.flatnonzero(deviation(plan, actual) > threshold)]
    if not bad:
        return plan, []
    fresh = plan_lina(actual[bad], plan.replica_expert.shape[1], plan.devices, plan.slots)
    rexp, rdev = plan.replica_expert.copy(), plan.replica_device.copy()
    planned = plan.planned_load.copy()
    rexp[bad], rdev[bad], planned[bad] = fresh.replica_expert, fresh.replica_device, actual[bad]
    return Placement(rexp, rdev, plan.devices, plan.slots, planned), bad


# ------------------------------------------------------------------ time-aware planning


def replica_mean_tokens(
    plan: Placement, tokens_per_step: float, load: Loads | None = None
) -> Loads:
    """Expected tokens each replica [L, R] gets in one step of ``tokens_per_step`` routed
    tokens per layer (batch tokens x top-k), split as the layer's ``load`` shares (the
    plan's own ``planned_load`` by default) and evenly over an expert's replicas."""
    load = plan.planned_load if load is None else load
    lam = tokens_per_step * shares(load) / np.maximum(plan.counts, 1)
    out: Loads = np.take_along_axis(lam, plan.replica_expert, axis=1)
    return out


def step_times(
    plan: Placement, tokens_per_step: float, cost: ExpertCost, load: Loads | None = None
) -> Loads:
    """Predicted time of each layer's expert step [L]: max over devices of the sum of its
    replicas' expected expert times (Poisson token counts, ``ExpertCost.expected``)."""
    t = cost.expected(replica_mean_tokens(plan, tokens_per_step, load))
    out = np.zeros(t.shape[0])
    for i in range(t.shape[0]):
        out[i] = np.bincount(plan.replica_device[i], weights=t[i], minlength=plan.devices).max()
    return out


def _cost_counts(lam: Loads, totals: list[int], cost: ExpertCost) -> dict[int, Ints]:
    """Counts [L, E] for each replica total in ``totals`` (each >= experts): every next
    replica goes to the expert whose replica costs the most (the divisor method on expected
    time instead of tokens). One greedy run; each total is a prefix of it."""
    layers, experts = lam.shape
    counts = np.ones((layers, experts), dtype=np.int64)
    rows = np.arange(layers)
    out = {experts: counts.copy()}
    for total in range(experts + 1, max(totals) + 1):
        pick = np.argmax(cost.expected(lam / counts), axis=1)
        counts[rows, pick] += 1
        out[total] = counts.copy()
    return {t: out[t] for t in totals}


def _pack_by_cost(lam: Loads, counts: Ints, devices: int, slots: int, cost: ExpertCost) -> Ints:
    experts, _ = expand(counts, lam)
    weights = cost.expected(np.take_along_axis(lam / counts, experts, axis=1))
    order = np.argsort(-weights, axis=1, kind="stable")
    experts = np.take_along_axis(experts, order, 1)
    weights = np.take_along_axis(weights, order, 1)
    device = greedy_pack(weights, devices, slots)
    device = refine_swaps(weights, device, devices, slots)
    return np.stack([experts, device])


def plan_uniform(experts: int, layers: int, replicas: int, devices: int, slots: int) -> Placement:
    """The same-budget baseline: every expert as many replicas as the budget gives evenly
    (the first ``replicas % experts`` one more), replica ``j`` of the flattened list on
    device ``j % devices`` (round-robin), so a device's experts are spread out."""
    counts = np.full(experts, replicas // experts, dtype=np.int64)
    counts[: replicas % experts] += 1
    rexp = np.tile(np.repeat(np.arange(experts), counts), (layers, 1))
    rdev = np.tile(np.arange(replicas) % devices, (layers, 1))
    flat = np.ones((layers, experts))
    return Placement(rexp, rdev, devices, slots, flat)


def regime_step_times(
    plan: Placement, regime: Sequence[tuple[float, float]], cost: ExpertCost, load: Loads
) -> Loads:
    """Expected expert step time of each layer [L] over the ``regime``'s step sizes
    (``(tokens per step, weight)``, weights summing to 1), under ``load``'s shares."""
    out = np.zeros(load.shape[0])
    for tokens, weight in regime:
        out += weight * step_times(plan, tokens, cost, load)
    return out


def _with_load(plan: Placement, load: Loads) -> Placement:
    return Placement(plan.replica_expert, plan.replica_device, plan.devices, plan.slots, load)


def plan_for_regime(
    load: Loads,
    replicas: int,
    devices: int,
    regime: Sequence[tuple[float, float]],
    cost: ExpertCost,
    slots: int | None = None,
    totals: int = 5,
) -> Placement:
    """A placement minimising the expected expert step time over the batch regime.

    ``regime``: ``(tokens per step, weight)`` pairs (``batch_regime.BatchHistogram``; routed
    tokens of one layer in one step, i.e. batch tokens x top-k). Each expert gets
    Poisson(tokens x its load share / its replicas) tokens per replica; a device's time is
    the sum of its replicas' expected ``cost``; a layer's step time the max over devices
    (``step_times``), weighted over the regime (``regime_step_times``).

    Candidates, all judged by that one objective: Lina's token-balancing plan and the
    uniform baseline on the whole budget; uniform with one replica per expert; and, for
    ``totals`` replica totals from one per expert up to ``replicas`` and for each step size
    of the regime, counts by the divisor method on expected time at that size, packed by
    expected time. Within one total the best candidate is taken layer by layer; the total
    with the lowest summed step time wins. So the plan follows the histogram (no threshold
    picks a mode) and is never predicted slower than token balance or uniform, whatever
    the regime. It may leave slots empty: at decode-sized steps an extra replica of an
    expert in its flat region only adds a call's floor.
    """
    slots = default_slots(replicas, devices) if slots is None else slots
    check_shape(load, replicas, devices, slots)
    regime = tuple(regime)
    if not regime:
        raise ValueError("regime: no batch sizes")
    for tokens, weight in regime:
        if not np.isfinite(tokens) or tokens <= 0:
            raise ValueError(f"tokens_per_step must be > 0, got {tokens}")
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"regime weights must be finite and >= 0, got {weight}")
    load = load.astype(np.float64)
    layers, experts = load.shape
    steps = max(1, totals - 1)
    chosen = sorted({experts + round(k * (replicas - experts) / steps) for k in range(totals)})
    by_total: dict[int, list[Placement]] = {t: [] for t in chosen}
    for tokens, _ in regime:
        lam = tokens * shares(load)
        for total, counts in _cost_counts(lam, chosen, cost).items():
            rexp, rdev = _pack_by_cost(lam, counts, devices, slots, cost)
            by_total[total].append(Placement(rexp, rdev, devices, slots, load))
    by_total[replicas] += [
        plan_lina(load, replicas, devices, slots),
        _with_load(plan_uniform(experts, layers, replicas, devices, slots), load),
    ]
    if -(-experts // devices) <= slots:
        one = plan_uniform(experts, layers, experts, devices, slots)
        by_total[experts].append(_with_load(one, load))
    best: Placement | None = None
    best_t = np.inf
    for cands in by_total.values():
        times = np.stack([regime_step_times(c, regime, cost, load) for c in cands])
        pick = np.argmin(times, axis=0)  # per layer; ties go to the earlier candidate
        rexp = np.stack([cands[k].replica_expert[i] for i, k in enumerate(pick)])
        rdev = np.stack([cands[k].replica_device[i] for i, k in enumerate(pick)])
        t = float(times[pick, np.arange(layers)].sum())
        if t < best_t:
            best, best_t = Placement(rexp, rdev, devices, slots, load), t
    assert best is not None
    return best


def plan_for_batch(
    load: Loads,
    replicas: int,
    devices: int,
    tokens_per_step: float,
    cost: ExpertCost,
    slots: int | None = None,
    totals: int = 5,
) -> Placement:
    """``plan_for_regime`` for one step size: ``tokens_per_step`` routed tokens per layer."""
    if not np.isfinite(tokens_per_step) or tokens_per_step <= 0:
        raise ValueError(f"tokens_per_step must be > 0, got {tokens_per_step}")
    return plan_for_regime(load, replicas, devices, ((tokens_per_step, 1.0),), cost, slots, totals)
