"""Start on a slower type only if the job finishes there first.

Phase 1 starts a queued job on the first type with room for its minimum, fastest first.
When the fast type (A100s) is full, that is a slow one (lent T4s, a third of an A100's
speed or less), and the job then runs there to its end unless a move pulls it off. For
a short job that is right: it would wait longer for the A100s than the T4s cost it. For
a long one it can be wrong twice: it finishes later than if it had waited, and it holds
the T4s through the bursts of short jobs that arrive meanwhile, which then queue behind
it. The 4-hour loan rule (``loan_max_remaining_s``) cuts this at a fixed length; the
length that wins depends on the pool (docs/lyra.md, "The loan rule").

This is the general form: a job starts on a slower type only if it is expected to
finish there no later than by waiting for its fastest type. The wait is projected per
type on a :class:`Timeline` of the type's GPUs: free now, released as the jobs placed on
it end at their current speed, and booked by the queued jobs ahead of it in phase 1's
order that chose to wait for it (they take the released GPUs first). The projection
ignores later arrivals and phase 2's growth; both make the real wait for a type
longer or shorter by what the next decisions do, which is why the rule is re-judged at
every decision, not kept.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from lyra_ray.model import ClusterSnapshot, GpuType, JobId, JobView
from lyra_ray.policies.lyra.remaining import ends_on_type

FinishFirst = Literal["rigid", "all"] | None
"""Which queued jobs the rule judges: rigid ones, all, or none (the policy's default)."""


MAX_BOOKED = 64
"""Waiting jobs booked on one type's timeline per decision. WHY a bound: each booking
makes every later judgement a pass over a longer timeline, and 3,000 queued jobs that
all waited took 3.5 s a decision (a scratch probe; 0.08 s with the rule off). Jobs past
the bound are judged against the timeline as it stands, which sees less of the queue
ahead of them: they wait for a faster type more readily than the first 64."""


@dataclass
class Timeline:
    """One GPU type's free GPUs over the projected future: ``changes`` of (time, +/-gpus)
    from now (0 s), with ``free_now`` GPUs free at time 0."""

    free_now: int
    changes: list[tuple[float, int]] = field(default_factory=list)
    booked: int = 0
    _steps: tuple[list[float], list[int], list[int]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def release(self, at_s: float, gpus: int) -> None:
        """A job there ends at ``at_s`` and frees ``gpus``."""
        if gpus > 0 and math.isfinite(at_s):
            bisect.insort(self.changes, (max(0.0, at_s), gpus))
            self._steps = None

    def earliest(self, gpus: int, duration_s: float) -> float:
        """The first time from which ``gpus`` are free for ``duration_s`` (inf: never).

        One pass over the levels (a start can only be now or a change): a candidate start
        survives until a level inside its run is too low, and the next candidate is the
        first change after that level. A start from which the level never again falls
        below ``gpus`` needs no walk."""
        times, levels, low_after = self._levels()
        n, i = len(times), 0
        while i < n:
            if levels[i] < gpus:
                i += 1
                continue
            if low_after[i] >= gpus:
                return times[i]
            end, j = times[i] + duration_s, i + 1
            while j < n and times[j] < end and levels[j] >= gpus:
                j += 1
            if j == n or times[j] >= end:
                return times[i]
            i = j + 1  # the level at ``j`` is too low: no start before it can span it
        return math.inf

    def occupy(self, gpus: int, duration_s: float) -> None:
        """A job placed on the type now takes ``gpus`` for ``duration_s`` (a fact of this
        decision, not a projection: never refused)."""
        bisect.insort(self.changes, (0.0, -gpus))
        if math.isfinite(duration_s):
            bisect.insort(self.changes, (duration_s, gpus))
        self._steps = None

    def book(self, start_s: float, gpus: int, duration_s: float) -> bool:
        """A job takes ``gpus`` from ``start_s`` for ``duration_s``; ``False`` (nothing
        booked) past :data:`MAX_BOOKED` or for a start that never comes."""
        if not math.isfinite(start_s) or self.booked >= MAX_BOOKED:
            return False
        self.booked += 1
        bisect.insort(self.changes, (start_s, -gpus))
        if math.isfinite(duration_s):
            bisect.insort(self.changes, (start_s + duration_s, gpus))
        self._steps = None
        return True

    def _levels(self) -> tuple[list[float], list[int], list[int]]:
        """Times (now, then each moment of change), the GPUs free from each on, and the
        fewest free from each on; kept until the timeline changes."""
        if self._steps is None:
            times, levels = [0.0], [self.free_now]
            for t, d in self.changes:
                if t <= times[-1]:
                    levels[-1] += d
                else:
                    times.append(t)
                    levels.append(levels[-1] + d)
            low_after = levels[:]
            for k in range(len(low_after) - 2, -1, -1):
                low_after[k] = min(low_after[k], low_after[k + 1])
            self._steps = (times, levels, low_after)
        return self._steps


def timeline_of(
    snap: ClusterSnapshot,
    chosen: Mapping[JobId, tuple[GpuType, int, int]],
    free: Mapping[GpuType, int],
    gpu_type: GpuType,
) -> Timeline:
    """``gpu_type``'s GPUs as phase 1 has placed them so far: free now, and each job
    placed there releasing its base when it ends at its current speed."""
    line = Timeline(free.get(gpu_type, 0))
    for end_s, gpus in ends_on_type(snap, chosen, gpu_type):
        line.release(end_s, gpus)
    return line


def judged(rule: FinishFirst, elastic_policy: bool, job: JobView) -> bool:
    """Whether ``rule`` weighs where ``job`` starts: queued, and rigid unless ``"all"``
    (a policy run without elasticity treats every job as rigid)."""
    if rule is None or job.current is not None:
        return False
    return rule == "all" or not (elastic_policy and job.spec.elastic)


def wait_for_faster(
    snap: ClusterSnapshot,
    job: JobView,
    t: GpuType,
    base: int,
    order: Sequence[GpuType],
    cap: Mapping[GpuType, int],
    free: Mapping[GpuType, int],
    chosen: Mapping[JobId, tuple[GpuType, int, int]],
    lines: dict[GpuType, Timeline],
) -> tuple[str, str] | None:
    """Why ``job``, which has room on ``t``, waits for its fastest type of ``order``
    instead (a reason for ``Allocation.waiting``, the wait booked on that type's
    timeline in ``lines``, built when first asked), or ``None``: it starts on ``t``."""
    usable = [g for g in order if cap.get(g, 0) >= base]
    best = max(usable, key=lambda g: (snap.throughput(job, g, base), g == t), default=t)
    slow, fast = snap.throughput(job, t, base), snap.throughput(job, best, base)
    if best == t or fast <= slow or free.get(best, 0) >= base:
        return None  # (room on ``best`` it may not take, e.g. its team's bounds: no wait)
    line = lines.get(best)
    if line is None:
        line = lines[best] = timeline_of(snap, chosen, free, best)
    here_s, there_s = job.remaining_steps / slow, job.remaining_steps / fast
    start = line.earliest(base, there_s)
    if start + there_s >= here_s:
        return None
    line.book(start, base, there_s)
    return (
        "faster_type",
        f"{t} GPUs are free, but it would finish sooner waiting for {best}: about "
        f"{start / 60:.0f} min, then {there_s / 3600:.1f} h, against "
        f"{here_s / 3600:.1f} h on {t}",
    )
