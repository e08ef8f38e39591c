"""The round-mechanism rules Gavel's simulator applies that the fidelity tests rely on.

* A job the allocation in force does not know (it arrived after the last reset) is
  *selected* like a priority-0 entry — it takes GPUs in the greedy pass — but does not
  run: Gavel's ``_schedule_jobs_on_workers`` skips it (``job_id not in
  self._allocation``) after ``_schedule_jobs_on_workers_helper`` counted its GPUs.
* Agnostic policies shuffle the GPU-type order with one ``Random(seed + 5)`` drawn once
  per round, in sequence (Gavel's ``_worker_type_shuffler``).
"""

from __future__ import annotations

import random

from lyra_ray.model import Allocation
from lyra_ray.scheduling.rounds import RoundMechanism
from tests.gavel_builders import TableThroughputs, job, snapshot


def test_a_job_unknown_to_the_allocation_takes_gpus_but_does_not_run() -> None:
    model = TableThroughputs({j: {"v100": 1.0} for j in "abc"})
    mech = RoundMechanism(min_reset_interval_s=1920.0)
    alloc = Allocation(fractions={"a": {"v100": 1.0}})
    # (t = 100, not 0: Gavel takes a reset at t = 0 for "never reset")
    out = mech.assign(snapshot([job("a")], {"v100": 2}, model, now=100.0), alloc, {})
    assert set(out) == {"a"}
    # b and c arrive one round later: the allocation cannot be reset yet (1920 s), so neither
    # is in it. b is selected for the free GPU (priority 0, id order) and idles there;
    # c, which the GPU count no longer allows, waits too.
    jobs = [job("a", time_received={"v100": 360.0}), job("b"), job("c")]
    snap = snapshot(jobs, {"v100": 2}, model, now=460.0)
    assert not mech.would_adopt(snap)
    out = mech.assign(snap, alloc, out)
    assert set(out) == {"a"}


def test_a_job_in_the_allocation_with_x_zero_still_gets_idle_gpus() -> None:
    model = TableThroughputs({j: {"v100": 1.0} for j in "ab"})
    alloc = Allocation(fractions={"a": {"v100": 1.0}, "b": {"v100": 0.0}})
    out = RoundMechanism().assign(snapshot([job("a"), job("b")], {"v100": 2}, model), alloc, {})
    assert set(out) == {"a", "b"}  # Gavel is work-conserving for jobs it knows


def test_agnostic_rounds_shuffle_types_with_gavels_stream_and_restore_alike() -> None:
    gpus = {"v100": 1, "p100": 1, "k80": 1}
    mech = RoundMechanism(shuffle_types=True, seed=0)
    mech._thr = {"a": {"v100": 3.0, "p100": 2.0, "k80": 1.0}}  # fastest first: v100, p100, k80
    ref = random.Random(0 + 5)
    for r in range(6):
        expected = ["v100", "p100", "k80"]
        ref.shuffle(expected)
        assert mech._type_order(gpus) == expected, r
        mech.state.rounds += 1
    restored = RoundMechanism.from_state(mech.to_state())
    restored._thr = mech._thr
    assert restored._type_order(gpus) == mech._type_order(gpus)
