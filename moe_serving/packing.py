"""Replica counting and device packing, vectorised across layers (numpy).

WHY vectorised across layers: a plan covers every MoE layer (58 for DeepSeek-V3) and all
layers are independent, so each greedy step is one numpy operation over all layers at once
instead of a Python loop per layer. WHY a swap pass after the greedy packing: longest-first
greedy with a per-device slot cap leaves the heaviest device a few percent above the mean;
exchanging one replica between the heaviest device and another device, when that lowers the
pair's maximum, removes most of that gap at little cost.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Loads = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def apportion(
    load: Loads, replicas: int, floor: Ints | None = None, cap: Ints | None = None
) -> Ints:
    """Replica counts [L, E] summing to ``replicas`` per layer, >= ``floor`` (default 1 each).

    Greedy: give the next replica to the expert with the highest load per replica. This is
    the divisor (D'Hondt) method, which minimises the maximum load per replica. With ``cap``
    no expert goes past its cap, and a layer whose experts are all capped stops short (the
    per-request split in ``dynamic.py``: floor 0 for unused experts, cap = tokens).
    """
    layers, experts = load.shape
    counts = np.ones((layers, experts), dtype=np.int64) if floor is None else floor.copy()
    left = replicas - counts.sum(1)
    if np.any(left < 0):
        what = f"experts ({experts})" if floor is None else f"the floor ({counts.sum(1).max()})"
        raise ValueError(f"replicas ({replicas}) must be >= {what}")
    rows = np.arange(layers)
    for _ in range(int(left.max(initial=0))):
        room = load / np.maximum(counts, 1)
        if cap is not None:
            room = np.where(counts < cap, room, -1.0)
        pick = np.argmax(room, axis=1)
        go = (left > 0) & (room[rows, pick] >= 0)
        counts[rows[go], pick[go]] += 1
        left -= go
    return counts


def expand(counts: Ints, load: Loads) -> tuple[Ints, Loads]:
    """Physical replicas per layer: (expert id [L, R], load carried [L, R]), heaviest first."""
    layers = counts.shape[0]
    per_rep = load / counts
    experts = np.stack([np.repeat(np.arange(counts.shape[1]), counts[i]) for i in range(layers)])
    weights = np.take_along_axis(per_rep, experts, axis=1)
    order = np.argsort(-weights, axis=1, kind="stable")
    return np.take_along_axis(experts, order, 1), np.take_along_axis(weights, order, 1)


def greedy_pack(weights: Loads, devices: int, slots: int) -> Ints:
    """Longest-first: each replica (heaviest first) to the lightest device with a free slot."""
    layers, reps = weights.shape
    if reps > devices * slots:
        raise ValueError(f"{reps} replicas do not fit {devices} devices x {slots} slots")
    loads = np.zeros((layers, devices))
    fill = np.zeros((layers, devices), dtype=np.int64)
    device = np.zeros((layers, reps), dtype=np.int64)
    rows = np.arange(layers)
    for j in range(reps):
        g = np.argmin(np.where(fill < slots, loads, np.inf), axis=1)
        device[:, j] = g
        loads[rows, g] += weights[:, j]
        fill[rows, g] += 1
    return device


def _slot_table(weights: Loads, device: Ints, devices: int, slots: int) -> tuple[Loads, Ints]:
    """Per-device slot tables: weight [L, G, S] (0 when empty) and replica index (-1)."""
    layers, reps = weights.shape
    w = np.zeros((layers, devices, slots))
    idx = np.full((layers, devices, slots), -1, dtype=np.int64)
    order = np.argsort(device, axis=1, kind="stable")
    dev_sorted = np.take_along_axis(device, order, 1)
    first = np.zeros((layers, devices), dtype=np.int64)
    for i in range(layers):
        counts = np.bincount(dev_sorted[i], minlength=devices)
        first[i] = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(reps)[None, :] - np.take_along_axis(first, dev_sorted, 1)
    rows = np.repeat(np.arange(layers), reps)
    idx[rows, dev_sorted.ravel(), rank.ravel()] = order.ravel()
    w[rows, dev_sorted.ravel(), rank.ravel()] = np.take_along_axis(weights, order, 1).ravel()
    return w, idx


def refine_swaps(
    weights: Loads,
    device: Ints,
    devices: int,
    slots: int,
    max_iter: int = 200,
    tol: float = 1e-5,
) -> Ints:
    """Swap replicas between the heaviest device and any other while the pair's max drops.

    Empty slots carry weight 0, so a swap with one is a move. Each accepted swap strictly
    lowers the sorted device-load vector, so the loop terminates; ``max_iter`` bounds it, and a
    layer stops early once within ``tol`` of the lower bound.
    """
    layers = weights.shape[0]
    w, idx = _slot_table(weights, device, devices, slots)
    rows = np.arange(layers)
    # A layer is done once its heaviest device is within `tol` of the lower bound
    # max(mean device load, heaviest replica) — no swap can beat that bound.
    bound = np.maximum(weights.sum(1) / devices, weights.max(1)) * (1.0 + tol)
    active = np.ones(layers, dtype=bool)
    for _ in range(max_iter):
        li = rows[active]
        if li.size == 0:
            break
        wl = w[li]
        loads = wl.sum(2)
        h = np.argmax(loads, axis=1)
        sub = np.arange(li.size)
        lh = loads[sub, h]
        a = wl[sub, h]  # [l, S]
        delta = a[:, None, :, None] - wl[:, :, None, :]  # [l, G, Sa, Sb]
        pair_max = np.maximum(lh[:, None, None, None] - delta, loads[:, :, None, None] + delta)
        pair_max[sub, h] = np.inf
        pair_max[delta <= 0] = np.inf
        flat = pair_max.reshape(li.size, -1)
        best = np.argmin(flat, axis=1)
        ok = (flat[sub, best] < lh * (1.0 - 1e-12)) & (lh > bound[li])
        active[li[~ok]] = False
        if not ok.any():
            break
        lo, hi = li[ok], h[ok]
        g, sa, sb = np.unravel_index(best[ok], (devices, slots, slots))
        wa, wb = w[lo, hi, sa].copy(), w[lo, g, sb].copy()
        ia, ib = idx[lo, hi, sa].copy(), idx[lo, g, sb].copy()
        w[lo, hi, sa], w[lo, g, sb] = wb, wa
        idx[lo, hi, sa], idx[lo, g, sb] = ib, ia
    rows = np.arange(layers)
    out = np.empty_like(device)
    dev_of_slot = np.broadcast_to(np.arange(devices)[None, :, None], idx.shape)
    mask = idx >= 0
    layer_of = np.broadcast_to(rows[:, None, None], idx.shape)
    out[layer_of[mask], idx[mask]] = dev_of_slot[mask]
    return out
