"""Lina's training-side scheduling (ATC'23): all-to-all strictly ahead of all-reduce.

In MoE training's backward pass, the expert all-to-alls (on the critical path) and the
dense gradients' all-reduce (which only has to be done by the optimizer step) run in
separate process groups and, left alone, share the links fairly: both are prolonged,
and the all-to-all's delay is the step's delay. Lina gives the all-to-all strict
priority. It cannot preempt a transfer already in flight: it works above the network,
by deciding when to *launch* each collective. So it cuts gradients into small equal
chunks (micro-ops), launches the next chunk only when no all-to-all is running, and
lets a chunk already launched finish alongside an all-to-all that arrives mid-way.
Smaller chunks block the all-to-all for less time but pay a launch overhead each:
the chunk size is the knob the benchmark sweeps.

In this model an op is "launched" once any of its flows has sent a byte; traffic class
0 is all-to-all, any other class is all-reduce (see :class:`~lyra_ray.network.flows.Flow`).
"""

from __future__ import annotations

import numpy as np

from lyra_ray.network.fairness import Array, max_min
from lyra_ray.network.flowsim import FlowView


class LinaScheduler:
    """All-to-all (class 0) first; launched all-reduce ops share fairly with it; the
    rest wait until no all-to-all is active. Without all-to-all: fair sharing."""

    name: str = "lina"

    def rates(self, view: FlowView) -> Array:
        n = len(view.flows)
        a2a = np.fromiter((f.cls == 0 for f in view.flows), dtype=bool, count=n)
        if not a2a.any():
            return max_min(view.incidence, view.capacity, weights=view.weight)
        launched_ops = {f.op for f, s in zip(view.flows, view.sent, strict=True) if s > 0}
        launched = np.fromiter(
            (f.cls != 0 and f.op in launched_ops for f in view.flows), dtype=bool, count=n
        )
        run = a2a | launched
        rate = np.zeros(n)
        rate[run] = max_min(view.incidence[:, run], view.capacity, weights=view.weight[run])
        return rate
