"""Max-min fair rates by progressive filling, with strict priority classes (numpy).

Why progressive filling: it is the definition of max-min fairness, which is what TCP
flows sharing a bottleneck converge to and what "fair sharing" means in the flow
scheduling literature (Varys, EchelonFlow). Every unfrozen flow's rate rises at the
same speed; when a link fills, the flows crossing it freeze. Each round saturates at
least one link or caps at least one flow, so it ends in at most links + flows rounds,
each one matrix-vector product.

The incidence matrix may hold multiplicities: a ring all-reduce that crosses one link
twice counts twice there (:mod:`lyra_ray.network.ring` uses this for whole rings).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

_REL_TOL = 1e-12


def _check(incidence: Array, capacity: Array) -> None:
    if incidence.ndim != 2 or capacity.ndim != 1 or incidence.shape[0] != capacity.shape[0]:
        raise ValueError(
            f"incidence: shape {incidence.shape} does not match capacity {capacity.shape}"
        )
    if np.any(capacity < 0):
        raise ValueError("capacity: link capacities must be >= 0")
    if np.any(incidence < 0):
        raise ValueError("incidence: multiplicities must be >= 0")


def fill(
    incidence: Array,
    residual: Array,
    eligible: npt.NDArray[np.bool_],
    caps: Array | None = None,
    base: Array | None = None,
    weights: Array | None = None,
) -> Array:
    """Raise the rates of the ``eligible`` flows max-min fairly on ``residual`` (mutated:
    what they take is subtracted). ``base`` is added to (the rates already given, e.g.
    a higher class's or a scheduler's reservation); ``caps`` bounds each flow's total.
    With ``weights``, a flow's rate rises ``weight`` times as fast (weighted max-min: a
    flow of weight 3 is three connections' worth).

    A flow that crosses no link gets its cap (``inf`` when uncapped): nothing limits it.
    """
    n = incidence.shape[1]
    rate = np.zeros(n) if base is None else base.copy()
    cap = np.full(n, np.inf) if caps is None else caps
    w = np.ones(n) if weights is None else weights
    tol = _REL_TOL * np.maximum(residual, 1.0)
    finite = np.isfinite(cap)
    limit = np.full(n, np.inf)
    limit[finite] = cap[finite] * (1.0 - _REL_TOL)
    on_links = incidence.any(axis=0)
    free = eligible & ~on_links
    rate[free] = np.maximum(rate[free], cap[free])
    active = eligible & on_links & (rate < limit)
    # A link already full freezes its flows before they get anything.
    full = residual <= tol
    if full.any():
        active &= ~incidence[full].any(axis=0)
    while active.any():
        users = incidence @ np.where(active, w, 0.0)
        used = users > 0
        share = np.min(residual[used] / users[used])
        headroom = np.min((cap[active] - rate[active]) / w[active])
        inc = max(0.0, min(share, headroom))
        rate[active] += inc * w[active]
        residual -= users * inc
        np.maximum(residual, 0.0, out=residual)
        saturated = used & (residual <= tol)
        frozen = incidence[saturated].any(axis=0) if saturated.any() else np.zeros(n, bool)
        active &= ~frozen & (rate < limit)
    return rate


def max_min(
    incidence: Array,
    capacity: Array,
    caps: Array | None = None,
    classes: npt.NDArray[np.int64] | None = None,
    weights: Array | None = None,
) -> Array:
    """Max-min fair rates; with ``classes``, strict priority: class 0 is filled first
    on the full capacity, class 1 on what class 0 left, and so on.

    ``incidence`` is links x flows (multiplicities), ``capacity`` one value per link.
    """
    incidence = np.asarray(incidence, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.float64)
    _check(incidence, capacity)
    n = incidence.shape[1]
    residual = capacity.copy()
    if weights is not None and (weights.shape != (n,) or np.any(weights <= 0)):
        raise ValueError(f"weights: one positive weight per flow, got shape {weights.shape}")
    if classes is None:
        return fill(incidence, residual, np.ones(n, bool), caps, weights=weights)
    if classes.shape != (n,):
        raise ValueError(f"classes: one class per flow, got shape {classes.shape} for {n}")
    rate = np.zeros(n)
    for c in np.unique(classes):
        rate = fill(incidence, residual, classes == c, caps, rate, weights)
    return rate
