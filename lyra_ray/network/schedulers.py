"""Flow schedulers on the fluid model: fair sharing, Coflow (Varys) and EchelonFlow.

- **Fair sharing** is per-flow max-min fairness: what TCP gives, the baseline every
  flow-scheduling paper starts from.
- **Coflow** is Varys's (SIGCOMM'14) smallest-effective-bottleneck-first: the Coflow
  whose remaining bytes would take least time on its most loaded link goes first; its
  flows get MADD rates (each just fast enough that all of them finish together, at that
  bottleneck time); then the next Coflow on what is left; leftover capacity is
  backfilled max-min fairly so that the schedule is work conserving.
- **EchelonFlow** (HotNets'22) generalises the Coflow's "finish together" to "finish
  in echelon": flow ``j`` of an EchelonFlow should finish at ``d + offset_j``, where the
  offsets come from the job's arrangement function. The scheduler is earliest-deadline
  first on those ideal finish times, which is exactly what minimises the maximum
  lateness on one link (Horn's preemptive EDF) and the usual heuristic on a network.
  An EchelonFlow's reference ``d`` is the later of what its finished flows have already
  committed it to (their ``finish - offset``) and the earliest it could reach with the
  network to itself: on each link, its flows in offset order, the most any prefix of
  them is late, ``max_k (bytes of flows 1..k / capacity - offset_k)``. Flows sharing a
  deadline (one collective) get MADD rates together.

  With every offset zero the reference is Varys's bottleneck time and the levels are
  whole Coflows, so EchelonFlow with Coflow arrangements *is* the Coflow scheduler:
  :class:`CoflowScheduler` is that configuration (the paper's "superset of Coflow at the
  same complexity"). The one difference is which label groups flows: a Coflow is one
  collective, an EchelonFlow may span a step's many collectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from lyra_ray.network.fairness import Array, fill, max_min
from lyra_ray.network.flowsim import FlowView

Index = npt.NDArray[np.int64]


class FairSharing:
    """Per-flow max-min fairness."""

    name: str = "fair"

    def rates(self, view: FlowView) -> Array:
        return max_min(view.incidence, view.capacity, weights=view.weight)


def madd(view: FlowView, levels: Sequence[Index]) -> Array:
    """Varys's MADD level by level, then max-min backfilling of what is left.

    Each level's flows get ``remaining / gamma``, ``gamma`` being the time the level's
    bytes need on its most loaded link with the capacity the earlier levels left: they
    all finish together at ``gamma`` and no faster flow wastes the bottleneck. A level
    whose links are already full waits (gets only backfill).
    """
    residual = view.capacity.copy()
    rate = np.zeros(len(view.flows))
    inc, rem = view.incidence, view.remaining
    for idx in levels:
        load = inc[:, idx] @ rem[idx]
        used = load > 0
        if not used.any():
            continue
        room = residual[used]
        if np.any(room <= 1e-12 * view.capacity[used]):
            continue
        gamma = float(np.max(load[used] / room))
        r = rem[idx] / gamma
        rate[idx] = r
        residual -= inc[:, idx] @ r
        residual[residual <= 1e-9 * view.capacity] = 0.0  # float dust is a full link
    return fill(inc, residual, np.ones(len(rate), dtype=bool), base=rate, weights=view.weight)


def standalone_lateness(
    incidence: Array, capacity: Array, remaining: Array, offsets: Array
) -> float:
    """The earliest reference time (from now) a group of flows could meet if it had the
    network to itself: per link, flows in offset order, the largest ``prefix bytes /
    capacity - offset``. Exact on one link (EDF), a lower bound on a network; with all
    offsets zero it is Varys's effective bottleneck."""
    order = np.argsort(offsets, kind="stable")
    load = incidence[:, order] * remaining[order]
    cum = np.cumsum(load, axis=1) / capacity[:, None]
    crossed = incidence[:, order] > 0
    late = np.where(crossed, cum - offsets[order][None, :], -np.inf)
    return float(np.max(late))


class EchelonScheduler:
    """Earliest ideal finish time first over EchelonFlows, MADD within a deadline.

    ``use_offsets=False`` and ``group="coflow"`` make it Varys's Coflow scheduler (see
    the module docstring). Flows with an empty group label are their own group.
    """

    name: str = "echelon"

    def __init__(self, group: str = "echelon", use_offsets: bool = True) -> None:
        if group not in ("echelon", "coflow"):
            raise ValueError(f"group: must be 'echelon' or 'coflow', got {group!r}")
        self.group = group
        self.use_offsets = use_offsets

    def deadlines(self, view: FlowView) -> tuple[list[str], Array]:
        """Each active flow's group and ideal finish time (absolute seconds)."""
        n = len(view.flows)
        groups = [getattr(f, self.group) or f"#{f.name}" for f in view.flows]
        offsets = np.array([f.offset if self.use_offsets else 0.0 for f in view.flows])
        members: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            members.setdefault(g, []).append(i)
        deadline = np.zeros(n)
        for g, ids in members.items():
            idx = np.asarray(ids, dtype=np.int64)
            tau = standalone_lateness(
                view.incidence[:, idx], view.capacity, view.remaining[idx], offsets[idx]
            )
            ref = view.now + tau
            if self.use_offsets and self.group == "echelon":
                ref = max(ref, view.echelon_ref.get(g, -np.inf))
            deadline[idx] = ref + offsets[idx]
        return groups, deadline

    def rates(self, view: FlowView) -> Array:
        groups, deadline = self.deadlines(view)
        keys: dict[tuple[float, str], list[int]] = {}
        for i, g in enumerate(groups):
            keys.setdefault((float(deadline[i]), g), []).append(i)
        levels = [np.asarray(keys[k], dtype=np.int64) for k in sorted(keys)]
        return madd(view, levels)


class CoflowScheduler(EchelonScheduler):
    """Varys: smallest effective bottleneck first, MADD, backfilling (offsets ignored)."""

    name: str = "coflow"

    def __init__(self) -> None:
        super().__init__(group="coflow", use_offsets=False)
