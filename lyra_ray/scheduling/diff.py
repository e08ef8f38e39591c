"""Step 7 of the cycle: what changed between the running and the placed assignments.

Each job's change becomes an action and updates the job's counters; a job whose
assignment is unchanged is left untouched (lease extension: no action at all). Every
``Preempt`` counts one preemption and every ``Resize`` one resize, so the report's
figures and the live action counters (``lyra_preemptions_total``, ...) agree: a job that
leaves every GPU type it ran on is a ``Preempt`` then a ``Launch``, not a ``Resize``.
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray import model as m
from lyra_ray.model import Assignment, JobId, JobStatus, NodeId
from lyra_ray.model.state import JobState


def _moved_type(prev: Assignment, a: Assignment) -> bool:
    """Whether the job left every GPU type it ran on: a migration, counted as a
    preemption. A job that keeps running on one of its types (a mixed-type job that
    loses its flexible workers on a loaned server, or its base there while it keeps
    enough workers elsewhere) is scaled in, as on one type."""
    if not prev.extra and not a.extra:
        return prev.gpu_type != a.gpu_type
    return not {g for g, _ in prev.parts} & {g for g, _ in a.parts}


def job_actions(
    jobs: Mapping[JobId, JobState],
    placed: Mapping[JobId, Assignment],
    previous: Mapping[JobId, Assignment],
    reclaimed: set[NodeId],
    now: float,
) -> tuple[list[m.Action], list[m.Action]]:
    """(stops: Preempt and Resize, starts: Launch), in job order, counters updated."""
    stops: list[m.Action] = []
    starts: list[m.Action] = []
    for jid in sorted(j for j in previous if j not in placed):
        j = jobs[jid]
        if any(n in reclaimed for n, _ in previous[jid].nodes):
            j.reclaim_preemptions += 1
        j.current, j.status = None, JobStatus.PREEMPTED
        j.num_preemptions += 1
        stops.append(m.Preempt(jid))
    # Unchanged: the very object (lease extension) or an equal one. Inline, field by
    # field (``Assignment.__eq__`` is interpreted: calling it from the compiled core
    # builds two tuples per job), as this walks every placed job at every round boundary.
    moved = [jid for jid, a in placed.items() if _differs(previous.get(jid), a)]
    for jid in sorted(moved):
        a, j = placed[jid], jobs[jid]
        prev = previous.get(jid)
        if prev is None:
            starts.append(m.Launch(jid, a))
            if j.first_start_s is None:
                j.first_start_s = now
        elif _moved_type(prev, a):
            # It left every GPU type it ran on: preempted there and launched elsewhere,
            # as the report counts it and as the live counters then count it too.
            j.num_preemptions += 1
            stops.append(m.Preempt(jid))
            starts.append(m.Launch(jid, a))
        else:
            j.num_resizes += 1  # a checkpoint and restart on other GPUs of its types
            stops.append(m.Resize(jid, a))
        j.current, j.status = a, JobStatus.RUNNING
        j.launched_s, j.lease_from_s, j.launch_steps = now, None, j.steps_done
    return stops, starts


def _differs(p: Assignment | None, a: Assignment) -> bool:
    """``p != a`` for assignments (all five fields), ``p is not a`` first."""
    return p is not a and (
        p is None
        or p.nodes != a.nodes
        or p.gpu_type != a.gpu_type
        or p.workers != a.workers
        or p.partner != a.partner
        or p.extra != a.extra
    )
