"""Step 7 of the cycle: what changed between the running and the placed assignments.

Each job's change becomes one action and updates the job's counters; a job whose
assignment is unchanged is left untouched (lease extension: no action at all).
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray import model as m
from lyra_ray.model import Assignment, JobId, JobStatus, NodeId
from lyra_ray.model.state import JobState


def _same(prev: Assignment | None, a: Assignment) -> bool:
    return prev is a or prev == a


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
    moved = [jid for jid, a in placed.items() if not _same(previous.get(jid), a)]
    for jid in sorted(moved):
        a, j = placed[jid], jobs[jid]
        prev = previous.get(jid)
        if prev is None:
            starts.append(m.Launch(jid, a))
            if j.first_start_s is None:
                j.first_start_s = now
        else:
            if prev.gpu_type != a.gpu_type:
                j.num_preemptions += 1
            elif prev.workers != a.workers:
                j.num_resizes += 1
            stops.append(m.Resize(jid, a))
        j.current, j.status = a, JobStatus.RUNNING
        j.launched_s, j.lease_from_s, j.launch_steps = now, None, j.steps_done
    return stops, starts
