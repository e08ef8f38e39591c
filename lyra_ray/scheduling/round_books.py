"""Gavel's bookkeeping for the round mechanism (:mod:`lyra_ray.scheduling.rounds`, rule 1).

Per entry (a job, or a pair) and GPU type, the time it ran since the last reset, and per
type the sum: what a round's priorities divide the target fractions by. :func:`credit`
adds last round's run time; :func:`reset` (Gavel's ``_reset_time_run_so_far``) folds the
period into each entry's deficit when a new allocation is adopted, and restarts the
counters at half a round. WHY apart from the mechanism: these functions own how
:class:`RoundState` changes between rounds, which is what a restored core must replay
alike; the mechanism owns choosing who runs. Each also drops the memo entries its change
makes stale (:class:`RoundMemo`), so a memo never answers with old counters.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from lyra_ray.model import (
    PAIR_SEP,
    Allocation,
    Assignment,
    GpuType,
    JobId,
    JobView,
    pair_key,
    split_pair,
)
from lyra_ray.scheduling.round_state import RoundMemo, RoundState

_EMPTY: dict[GpuType, float] = {}


def credit(
    state: RoundState,
    memo: RoundMemo,
    active: Mapping[JobId, JobView],
    prev: Mapping[JobId, Assignment],
) -> None:
    """Add last round's run time to the entry (job or pair) that ran, and its type."""
    done: set[str] = set()
    seen, job_time, worker_time = state.seen, state.job_time, state.worker_time
    index = memo.index
    for jid, a in prev.items():
        gt = a.gpu_type
        if a.partner:
            key = pair_key(jid, a.partner)
            if key in done:
                continue
            done.add(key)
            delta = 0.0
            for member in split_pair(key):
                job = active.get(member)
                if job is not None:
                    now_t = float(job.time_received_s.get(gt, 0.0))
                    delta = max(delta, now_t - seen.get(member, _EMPTY).get(gt, 0.0))
        else:  # ``prev`` holds each job once: only pairs need ``done``
            key = jid
            job = active.get(jid)
            if job is None:
                continue
            delta = job.time_received_s.get(gt, 0.0) - seen.get(jid, _EMPTY).get(gt, 0.0)
        if delta <= 0:
            continue
        per = job_time.get(key)
        if per is None:
            per = job_time[key] = {}
            memo.entry_cache = None  # a cached row holds the empty default
        per[gt] = per.get(gt, 0.0) + delta
        worker_time[gt] = worker_time.get(gt, 0.0) + delta
        if index is not None:
            index.dirty.add(key)
    # The views' own mappings, not copies: a snapshot is immutable (the core builds
    # each view's ``time_received_s`` afresh), and copying one dict per active job
    # every round would cost more than the rest of the bookkeeping.
    state.seen = {jid: j.time_received_s for jid, j in active.items()}


def reset(
    state: RoundState,
    memo: RoundMemo,
    now: float,
    active: Mapping[JobId, JobView],
    allocation: Allocation,
    half: float,
) -> None:
    """Gavel's ``_reset_time_run_so_far``: fold the last period into deficits, restart."""
    elapsed = 0.0 if state.last_reset is None else now - state.last_reset
    types = set(state.worker_time)
    for per in allocation.fractions.values():
        types.update(per)
    job_time, ref, deficits = state.job_time, state.alloc_ref, state.deficits
    for key in set(job_time) | set(ref):
        per_def = deficits.get(key)
        if per_def is None:
            per_def = deficits[key] = {}
        got_row, ref_row = job_time.get(key, _EMPTY), ref.get(key, _EMPTY)
        for gt in types:
            got = got_row.get(gt)
            received = 0.0 if got is None else got - half
            should = ref_row.get(gt, 0.0) * elapsed
            per_def[gt] = per_def.get(gt, 0.0) + should - received
    live = set(active)
    state.deficits = {k: v for k, v in deficits.items() if _alive(k, live)}
    new_keys = set(active) | {k for k in allocation.fractions if _alive(k, live)}
    state.job_time = {k: dict.fromkeys(types, half) for k in new_keys}
    state.worker_time = {gt: half * len(new_keys) for gt in types}
    state.job_set = sorted(active)
    state.last_reset = now
    memo.run_cache = {k: v for k, v in memo.run_cache.items() if k in state.job_time}
    state.alloc_ref = {k: dict(v) for k, v in allocation.fractions.items()}


def _alive(key: str, live: set[JobId]) -> bool:
    """Whether the entry's job (or both of a pair's) is active; splits only pair keys."""
    return key in live if PAIR_SEP not in key else all(m in live for m in split_pair(key))
