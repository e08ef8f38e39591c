"""Gavel's round mechanism: priorities, gangs, lease extension, convergence to X."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray.model import Allocation, Assignment, ClusterSnapshot, JobView, pair_key
from lyra_ray.scheduling.rounds import RoundMechanism
from tests.gavel_builders import TableThroughputs, job, snapshot

ROUND = 360.0


def run_rounds(
    jobs: list[JobView],
    gpus: dict[str, int],
    model: TableThroughputs,
    alloc: Allocation,
    rounds: int,
    mech: RoundMechanism | None = None,
) -> tuple[dict[str, dict[str, float]], list[dict[str, Assignment]]]:
    """Drive the mechanism like the core would: every assigned job runs the full round."""
    mech = mech or RoundMechanism()
    received: dict[str, dict[str, float]] = {j.id: {} for j in jobs}
    prev: dict[str, Assignment] = {}
    history = []
    for r in range(rounds):
        views = [
            job(j.id, sf=j.spec.min_workers, time_received=received[j.id], user=j.spec.user)
            for j in jobs
        ]
        snap = snapshot(views, gpus, model, now=r * ROUND, round_s=ROUND)
        out = mech.assign(snap, alloc, prev)
        for jid, a in out.items():
            received[jid][a.gpu_type] = received[jid].get(a.gpu_type, 0.0) + ROUND
        prev = out
        history.append(out)
    return received, history


def _used(out: Mapping[str, Assignment]) -> dict[str, int]:
    used: dict[str, int] = {}
    seen: set[str] = set()
    for jid, a in out.items():
        key = pair_key(jid, a.partner) if a.partner else jid
        if key in seen:
            continue
        seen.add(key)
        used[a.gpu_type] = used.get(a.gpu_type, 0) + a.workers
    return used


def test_two_jobs_share_one_gpu_half_and_half() -> None:
    jobs = [job("a"), job("b")]
    model = TableThroughputs({"a": {"v100": 1.0}, "b": {"v100": 1.0}})
    alloc = Allocation(fractions={"a": {"v100": 0.5}, "b": {"v100": 0.5}})
    received, history = run_rounds(jobs, {"v100": 1}, model, alloc, 10)
    assert received["a"]["v100"] == received["b"]["v100"] == 5 * ROUND
    runners = [next(iter(h)) for h in history]
    assert all(x != y for x, y in itertools.pairwise(runners))  # alternate


def test_time_shares_follow_x() -> None:
    jobs = [job("a"), job("b"), job("c")]
    model = TableThroughputs({j: {"v100": 1.0} for j in "abc"})
    alloc = Allocation(fractions={"a": {"v100": 0.5}, "b": {"v100": 0.25}, "c": {"v100": 0.25}})
    received, _ = run_rounds(jobs, {"v100": 1}, model, alloc, 40)
    assert received["a"]["v100"] == 20 * ROUND
    assert received["b"]["v100"] == received["c"]["v100"] == 10 * ROUND


def test_gang_that_does_not_fit_is_skipped_not_blocking() -> None:
    jobs = [job("big", sf=4), job("small")]
    model = TableThroughputs({"big": {"k80": 1.0}, "small": {"k80": 1.0}})
    alloc = Allocation(fractions={"big": {"k80": 1.0}, "small": {"k80": 0.1}})
    _, history = run_rounds(jobs, {"k80": 3}, model, alloc, 3)
    for out in history:
        assert "big" not in out  # 4 GPUs never fit in 3
        assert out["small"] == Assignment(gpu_type="k80", workers=1)


def test_idle_gpus_go_to_zero_priority_jobs() -> None:
    jobs = [job("a"), job("b")]
    model = TableThroughputs({"a": {"v100": 2.0, "k80": 1.0}, "b": {"v100": 2.0, "k80": 1.0}})
    alloc = Allocation(fractions={"a": {"v100": 1.0}, "b": {"k80": 0.0}})
    _, history = run_rounds(jobs, {"v100": 1, "k80": 1}, model, alloc, 2)
    assert history[0]["a"].gpu_type == "v100"
    assert history[0]["b"].gpu_type == "k80"


def test_lease_extension_keeps_the_same_assignment_object() -> None:
    model = TableThroughputs({"a": {"v100": 1.0}})
    alloc = Allocation(fractions={"a": {"v100": 1.0}})
    mech = RoundMechanism()
    placed = Assignment(gpu_type="v100", workers=1, nodes=(("n0", 1),))
    snap = snapshot([job("a", time_received={"v100": ROUND})], {"v100": 1}, model, now=ROUND)
    out = mech.assign(snap, alloc, {"a": placed})
    assert out["a"] is placed  # same type, same partner: nodes kept, nothing preempted


def test_pairs_get_both_members_with_partner() -> None:
    jobs = [job("a"), job("b")]
    model = TableThroughputs(
        {"a": {"v100": 1.0}, "b": {"v100": 1.0}}, pairs={("a", "b", "v100"): (0.8, 0.7)}
    )
    alloc = Allocation(
        fractions={"a": {"v100": 0.0}, "b": {"v100": 0.0}, pair_key("a", "b"): {"v100": 1.0}}
    )
    _, history = run_rounds(jobs, {"v100": 1}, model, alloc, 2)
    out = history[0]
    assert out["a"] == Assignment(gpu_type="v100", workers=1, partner="b")
    assert out["b"] == Assignment(gpu_type="v100", workers=1, partner="a")
    assert _used(out) == {"v100": 1}


def test_state_round_trips_through_json() -> None:
    jobs = [job("a"), job("b"), job("c", sf=2)]
    model = TableThroughputs({j: {"v100": 1.0, "k80": 0.5} for j in "abc"})
    alloc = Allocation(
        fractions={
            "a": {"v100": 0.6, "k80": 0.2},
            "b": {"v100": 0.2, "k80": 0.7},
            "c": {"v100": 0.4},
        }
    )
    mech = RoundMechanism()
    run_rounds(jobs, {"v100": 2, "k80": 2}, model, alloc, 5, mech)
    clone = RoundMechanism.from_state(json.loads(json.dumps(mech.to_state())))
    assert clone.to_state() == mech.to_state()
    snap = snapshot(jobs, {"v100": 2, "k80": 2}, model, now=5 * ROUND)
    assert clone.assign(snap, alloc, {}) == mech.assign(snap, alloc, {})


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1, 1, 2, 4]), min_size=1, max_size=8),
    st.dictionaries(st.sampled_from(["k80", "p100", "v100"]), st.integers(0, 6), min_size=1),
    st.lists(st.floats(0.0, 1.0), min_size=24, max_size=24),
)
def test_invariants(sfs: list[int], gpus: dict[str, int], xs: list[float]) -> None:
    jobs = [job(f"j{i}", sf=s) for i, s in enumerate(sfs)]
    types = sorted(gpus)
    model = TableThroughputs({j.id: dict.fromkeys(types, 1.0) for j in jobs})
    fr = {
        j.id: {t: xs[(i * 3 + k) % 24] / len(types) for k, t in enumerate(types)}
        for i, j in enumerate(jobs)
    }
    _, history = run_rounds(jobs, gpus, model, Allocation(fractions=fr), 4)
    for out in history:
        for t, used in _used(out).items():
            assert used <= gpus[t]  # no GPU over-allocated
        for jid, a in out.items():
            assert a.workers == next(j.spec.min_workers for j in jobs if j.id == jid)  # gang
        # work conserving: nothing that fits was left out
        left = {t: gpus[t] - _used(out).get(t, 0) for t in types}
        for j in jobs:
            if j.id not in out:
                assert all(left[t] < j.spec.min_workers for t in types)


def test_priorities_follow_gavels_definition() -> None:
    model = TableThroughputs({"a": {"v100": 1.0}, "b": {"v100": 1.0}})
    alloc = Allocation(fractions={"a": {"v100": 0.75}, "b": {"v100": 0.25}})
    mech = RoundMechanism()
    snap0: ClusterSnapshot = snapshot([job("a"), job("b")], {"v100": 1}, model, now=0.0)
    mech.assign(snap0, alloc, {})
    pr = mech.priorities(snap0)["v100"]
    # right after a reset every entry has received half a round: fraction 1/2 each
    assert abs(pr["a"] - 0.75 / 0.5) < 1e-12
    assert abs(pr["b"] - 0.25 / 0.5) < 1e-12
