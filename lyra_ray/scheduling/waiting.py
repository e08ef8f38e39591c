"""Why a job waits: a stable code and a sentence for every queued or preempted job.

Why: a job that sits in the queue with no word is the first thing a user asks about
(Kueue gives every workload a condition saying why it is not admitted). The reason is
derived, not stored: from the core's snapshot, the policy's last allocation and the
round clock, whenever someone asks, so it is never stale and costs nothing per cycle.

Codes (stable; ``docs/runtime.md`` lists them, the teams layer adds ``quota``):

* ``no_fit``: its minimum worker count fits on no GPU type it can run on;
* ``loan_rule`` (and any other code a policy gives in ``Allocation.waiting``): the
  policy keeps it off GPUs for a rule of its own, e.g. Lyra's 4-hour rule on loans;
* ``faster_type``: GPUs of a slower type are free, but the policy expects it to finish
  sooner by waiting for a faster one (Lyra's ``finish_first``);
* ``round``: its allocation gives it time, and it waits for its turn in Gavel's rounds;
* ``capacity``: the GPUs it can use went to other jobs this time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lyra_ray.model import Allocation, ClusterSnapshot, JobId, JobView, split_pair

CODES = ("no_fit", "loan_rule", "faster_type", "round", "capacity")


@dataclass(frozen=True)
class WaitReason:
    code: str
    message: str


def wait_reasons(
    snap: ClusterSnapshot, alloc: Allocation, next_round_s: float | None
) -> dict[JobId, WaitReason]:
    """A reason for every active job that holds no GPUs now."""
    gpus = snap.gpus_by_type(None)
    share: dict[JobId, float] = {}
    for key, row in alloc.fractions.items():
        for member in split_pair(key):
            share[member] = share.get(member, 0.0) + sum(row.values())
    out: dict[JobId, WaitReason] = {}
    for j in snap.active_jobs:
        if j.current is None:
            out[j.id] = _reason(j, snap, alloc.waiting, gpus, share, next_round_s)
    return out


def _reason(
    j: JobView,
    snap: ClusterSnapshot,
    policy: Mapping[JobId, tuple[str, str]],
    gpus: Mapping[str, int],
    share: Mapping[JobId, float],
    next_round_s: float | None,
) -> WaitReason:
    need = j.spec.min_workers
    usable = {g: n for g, n in gpus.items() if snap.throughput(j, g, need) > 0}
    if not any(n >= need for n in usable.values()):
        have = ", ".join(f"{g}: {n}" for g, n in sorted(usable.items())) or "none"
        return WaitReason(
            "no_fit",
            f"needs {need} GPUs of one type it can run on; the cluster has {have}",
        )
    if j.id in policy:
        code, message = policy[j.id]
        return WaitReason(code, message)
    if share.get(j.id, 0.0) > 1e-9:
        when = (
            f"; the next round starts in {max(0.0, next_round_s - snap.now):.0f} s"
            if next_round_s is not None
            else ""
        )
        return WaitReason(
            "round",
            f"waits for its turn in the rounds ({share[j.id]:.0%} of its time on GPUs){when}",
        )
    types = ", ".join(sorted(g for g, n in usable.items() if n >= need))
    return WaitReason("capacity", f"waits for GPUs: the {types} GPUs it can use went to other jobs")
