"""The values of lyra's metrics, computed from the scheduler's state (pure).

WHY pure: the live exporter and the simulator's report must give the same number for
the same quantity, and a unit test can check the arithmetic (the uses of a pool sum to
its GPUs; a job that received exactly its allocation has a fair-share ratio of 1)
without a cluster.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lyra_ray import model as m
from lyra_ray.model import JobId, JobStatus, NodeId, split_pair
from lyra_ray.scheduling.core import SchedulerCore

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    name: str
    value: float
    labels: Labels = ()


ACTION_COUNTERS: dict[type, str] = {
    m.Launch: "lyra_launches_total",
    m.Preempt: "lyra_preemptions_total",
    m.Resize: "lyra_resizes_total",
    m.Lend: "lyra_lends_total",
    m.Reclaim: "lyra_reclaims_total",
}
"""Each counted action kind, and the counter it adds to."""

SERVER_STATES = ("serving", "draining", "lent", "reclaiming")


def action_counts(actions: Iterable[m.Action]) -> dict[str, int]:
    """How much each action counter grows for these actions (every counter present)."""
    out = dict.fromkeys(ACTION_COUNTERS.values(), 0)
    for a in actions:
        name = ACTION_COUNTERS.get(type(a))
        if name is not None:
            out[name] += 1
    return out


def gpu_samples(core: SchedulerCore) -> list[Sample]:
    """``lyra_gpus`` by (type, pool, use); every use of every (type, pool) is present."""
    busy = core.busy_gpus()
    uses = {"training": ("training", "idle"), "inference": ("serving", "lent", "idle")}
    totals: dict[tuple[str, str, str], int] = {}
    for n in core.nodes.values():
        pool = "inference" if n.pool == "inference" else "training"
        for use in uses[pool]:
            totals.setdefault((n.gpu_type, pool, use), 0)
        used = min(n.num_gpus, busy.get(n.id, 0))
        if pool == "training":
            parts = {"training": used, "idle": n.num_gpus - used}
        elif n.id in core.lent:
            parts = {"lent": used, "idle": n.num_gpus - used}
        else:
            parts = {"serving": n.num_gpus}
        for use, g in parts.items():
            totals[(n.gpu_type, pool, use)] += g
    return [
        Sample("lyra_gpus", float(v), (("gpu_type", t), ("pool", p), ("use", u)))
        for (t, p, u), v in sorted(totals.items())
    ]


def allocated_share(allocation: m.Allocation) -> dict[JobId, float]:
    """The share of time each job's allocation gives it: Gavel's X summed over GPU types
    (a pair's time counts for both of its jobs); a job sized in whole workers gets 1."""
    out: dict[JobId, float] = {}
    for key, row in allocation.fractions.items():
        for jid in split_pair(key):
            out[jid] = out.get(jid, 0.0) + sum(row.values())
    for jid in allocation.workers:
        out[jid] = 1.0
    return out


def fair_share_ratio(received_s: float, elapsed_s: float, share: float) -> float | None:
    """Received share of time over allocated share (Gavel's priority is its inverse);
    None where either is not defined yet."""
    if elapsed_s <= 0 or share <= 0:
        return None
    return (received_s / elapsed_s) / share


def state_samples(
    core: SchedulerCore,
    server_states: Mapping[NodeId, str] | None = None,
    steps_per_s: Mapping[JobId, float] | None = None,
) -> list[Sample]:
    """Every gauge lyra exports that the core's state determines.

    ``server_states``: the live serving pool's view of each inference server (it knows
    draining and reclaiming); without it, the core's lent set decides lent or serving.
    """
    now = core.now
    out = []
    counts = dict.fromkeys((s.value for s in JobStatus), 0)
    for j in core.jobs.values():
        counts[j.status.value] += 1
    out += [Sample("lyra_jobs", float(v), (("state", k),)) for k, v in sorted(counts.items())]
    waiting = [j for j in core.active() if j.current is None]
    out.append(Sample("lyra_queue_length", float(len(waiting))))
    oldest = max((now - j.arrival_s for j in waiting), default=0.0)
    out.append(Sample("lyra_queue_oldest_age_seconds", max(0.0, oldest)))
    out += gpu_samples(core)
    states = dict.fromkeys(SERVER_STATES, 0)
    for n in core.nodes.values():
        if n.pool != "inference":
            continue
        st = (server_states or {}).get(n.id) or ("lent" if n.id in core.lent else "serving")
        states[st] = states.get(st, 0) + 1
    out += [Sample("lyra_inference_servers", float(v), (("state", k),)) for k, v in states.items()]
    out.append(Sample("lyra_serving_demand_servers", float(core.serving_demand)))
    shares = allocated_share(core.allocation)
    for j in core.active():
        if j.current is None:
            continue
        labels = (("job_id", j.id), ("name", j.spec.name))
        if j.spec.total_steps > 0:
            out.append(Sample("lyra_job_progress_ratio", j.steps_done / j.spec.total_steps, labels))
        ratio = fair_share_ratio(
            sum(j.time_received_s.values()), now - j.arrival_s, shares.get(j.id, 0.0)
        )
        if ratio is not None:
            out.append(Sample("lyra_job_fair_share_ratio", ratio, labels))
        rate = (steps_per_s or {}).get(j.id)
        if rate is not None:
            out.append(Sample("lyra_job_steps_per_second", rate, labels))
    return out


class StepRates:
    """Each running job's steps per second over a sliding window of its progress.

    WHY a window: live progress arrives in bursts (one report per checkpoint), so the
    rate between two cycles is mostly 0 and sometimes huge.
    """

    def __init__(self, window_s: float = 60.0) -> None:
        if not window_s > 0:
            raise ValueError(f"field 'window_s': must be > 0, got {window_s!r}")
        self.window_s = window_s
        self._seen: dict[JobId, deque[tuple[float, float]]] = {}

    def update(self, now: float, jobs: Sequence[tuple[JobId, float]]) -> dict[JobId, float]:
        """``jobs``: (id, steps done) of the running jobs; returns their rates (a job
        seen for less than two points has none yet). Jobs not listed are forgotten."""
        out: dict[JobId, float] = {}
        keep = {jid for jid, _ in jobs}
        for jid in [k for k in self._seen if k not in keep]:
            del self._seen[jid]
        for jid, steps in jobs:
            q = self._seen.setdefault(jid, deque())
            if q and steps < q[-1][1]:  # restored from an older checkpoint: start over
                q.clear()
            q.append((now, steps))
            while len(q) > 2 and now - q[1][0] >= self.window_s:
                q.popleft()
            (t0, s0), (t1, s1) = q[0], q[-1]
            if t1 > t0:
                out[jid] = (s1 - s0) / (t1 - t0)
        return out
