"""Mid-round backfill: GPUs left idle in a round go to a waiting job at once.

Gavel's rounds hand out GPUs only at a round boundary, so a job that finishes early
leaves its GPUs idle until the round ends (up to ``round_s``, 6 minutes by default),
even while a job its allocation entitles to them waits, and a job that arrives while
GPUs it can use sit idle waits too. That is faithful to Gavel's simulator, which the
simulator keeps by default; live it is minutes of idle GPUs and a queued job for no
reason. With ``backfill`` the core runs the round mechanism at once with every running
job pinned where it is: only idle GPUs are handed out (by the round's own priorities),
nobody is preempted, and the round clock is not reset, so the next real round still
comes on time and rotates jobs as Gavel would.

WHY only on events that can change the answer (an arrival, a completion, a stop, a
failure, a cancel, a node coming up), and only when a waiting job fits on idle GPUs of
a type it may use: otherwise every cycle would run the round mechanism for nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from lyra_ray import model as m
from lyra_ray.model import Assignment, JobId, NodeId

TRIGGERS = (m.JobSubmitted, m.JobCompleted, m.JobFailed, m.JobStopped, m.JobCancelled, m.NodeUp)
"""Events after which idle GPUs may have a taker: an arrival, or GPUs freed or added."""


def may_start_early(events: Sequence[m.Event]) -> bool:
    return any(isinstance(e, TRIGGERS) for e in events)


def idle_gpus_wanted(
    nodes: Mapping[NodeId, m.Node],
    lent: Iterable[NodeId],
    running: Iterable[Assignment],
    waiting: Iterable[tuple[JobId, int]],
    fractions: Mapping[str, Mapping[str, float]],
    usable: Callable[[JobId, int], Iterable[str]],
) -> bool:
    """Whether a waiting job (id, minimum workers) could start on idle GPUs of a type its
    allocation gives it time on; a job the allocation does not cover yet (it just
    arrived) takes any type it can run on (``usable(id, workers)``)."""
    lent = set(lent)
    free: dict[str, int] = {}
    for n in nodes.values():
        if n.pool == "training" or n.id in lent:
            free[n.gpu_type] = free.get(n.gpu_type, 0) + n.num_gpus
    for a in running:
        for node, g in a.nodes:
            t = nodes[node].gpu_type if node in nodes else a.gpu_type
            free[t] = free.get(t, 0) - g
    if max(free.values(), default=0) <= 0:
        return False  # the common case on a busy cluster: nothing to give
    for jid, need in waiting:
        row = fractions.get(jid)
        types = usable(jid, need) if row is None else [t for t, x in row.items() if x > 0]
        if any(free.get(t, 0) >= need for t in types):
            return True
    return False
