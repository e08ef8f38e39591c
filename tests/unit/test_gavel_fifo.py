"""Gavel's FIFO family decision by decision: ``fifo``, ``fifo_perf``, ``fifo_packed``.

The expected answers of ``fifo`` were taken from Gavel's own ``FIFOPolicy(seed=0)`` (commit
c4fa400, run on the same inputs in Gavel's environment): its type is the alphabetically
last one with free GPUs, the random draw only picks which type leaves the list when that
one fills up, and its placements are kept across recomputations.
"""

from __future__ import annotations

from lyra_ray.policies.base import get_policy
from tests.gavel_builders import TableThroughputs, job, snapshot

SPEEDS = {"k80": 1.0, "p100": 2.0, "v100": 3.0}
GPUS = {"k80": 2, "p100": 2, "v100": 2}


def _types(alloc_fractions: object) -> dict[str, str]:
    fr = dict(alloc_fractions)  # type: ignore[call-overload]
    return {
        k: next(g for g, x in row.items() if x == 1.0) for k, row in fr.items() if any(row.values())
    }


def test_agnostic_fifo_follows_gavels_rule_and_overcommits_like_it() -> None:
    names = [f"j{i}" for i in range(10)]
    model = TableThroughputs({n: SPEEDS for n in names})
    pol = get_policy("fifo")
    first = [job(n, arrival=float(i)) for i, n in enumerate(names[:8])]
    got = _types(pol.allocate(snapshot(first, GPUS, model)).fractions)
    # Gavel: {0..7: v100}. Random(0)'s second draw (1) removes p100 when v100 fills up, so
    # v100 stays "open" below zero and takes every later job of the pass.
    assert got == {n: "v100" for n in names[:8]}
    # j0 and j2 finish, j8 and j9 arrive. Gavel: j8 takes j0's v100 (counted before the
    # running jobs after j0 in id order), j2's GPU goes to nobody (the count is now 0),
    # and j9 takes p100, the last type that still has free GPUs.
    later = [j for j in first if j.id not in ("j0", "j2")]
    later += [job("j8", arrival=8.0), job("j9", arrival=9.0)]
    got = _types(pol.allocate(snapshot(later, GPUS, model, now=400.0)).fractions)
    assert got == {**{n: "v100" for n in ("j1", "j3", "j4", "j5", "j6", "j7", "j8")}, "j9": "p100"}


def test_agnostic_fifo_state_round_trips() -> None:
    names = [f"j{i}" for i in range(6)]
    model = TableThroughputs({n: SPEEDS for n in names})
    jobs = [job(n, arrival=float(i)) for i, n in enumerate(names)]
    a, b = get_policy("fifo"), get_policy("fifo")
    a.allocate(snapshot(jobs[:4], {"k80": 1, "p100": 1, "v100": 1}, model))
    b.load_state(a.to_state())
    snap = snapshot(jobs[1:], {"k80": 1, "p100": 1, "v100": 1}, model, now=10.0)
    assert a.allocate(snap) == b.allocate(snap)
    assert a.to_state() == b.to_state()


def test_agnostic_fifo_never_keeps_a_job_where_it_cannot_run() -> None:
    # Gavel would put "big" on v100 (the last type), where it has no throughput, and skip
    # it for ever; here it takes a type with room that can run it.
    model = TableThroughputs({"big": {"a100": 1.0}, "small": {"a100": 1.0, "v100": 1.0}})
    jobs = [job("big", sf=8, arrival=0.0), job("small", sf=8, arrival=1.0)]
    got = _types(
        get_policy("fifo").allocate(snapshot(jobs, {"a100": 8, "v100": 16}, model)).fractions
    )
    assert got == {"big": "a100", "small": "v100"}


def test_fifo_perf_places_the_queue_afresh_on_the_fastest_type_with_room() -> None:
    model = TableThroughputs({n: SPEEDS for n in "abcde"})
    pol = get_policy("fifo_perf")
    jobs = [job(n, arrival=float(i)) for i, n in enumerate("abcde")]
    got = _types(pol.allocate(snapshot(jobs, GPUS, model)).fractions)
    assert got == {"a": "v100", "b": "v100", "c": "p100", "d": "p100", "e": "k80"}
    # a ends: b moves up to ... nothing is kept, so everyone is placed again in order
    got = _types(pol.allocate(snapshot(jobs[1:], GPUS, model, now=1.0)).fractions)
    assert got == {"b": "v100", "c": "v100", "d": "p100", "e": "p100"}


def test_fifo_packed_packs_the_queue_head_with_its_best_partner_above_threshold() -> None:
    alone = {n: {"v100": 1.0} for n in "abc"}
    pairs = {("a", "c", "v100"): (0.9, 0.9), ("b", "c", "v100"): (0.7, 0.7)}
    model = TableThroughputs(alone, pairs)
    jobs = [job(n, arrival=float(i)) for i, n in enumerate("abc")]
    fr = get_policy("fifo_packed").allocate(snapshot(jobs, {"v100": 2}, model)).fractions
    # a and b fill both GPUs; c joins a (0.9 + 0.9 = 1.8 > 1.5); b with c would give 1.4
    assert fr["a+c"]["v100"] == 1.0
    assert fr["b"]["v100"] == 1.0
    assert fr["a"]["v100"] == 0.0 and fr["c"]["v100"] == 0.0


def test_fifo_packed_stops_at_the_first_job_without_a_partner() -> None:
    alone = {n: {"v100": 1.0} for n in "abcd"}
    pairs = {("a", "d", "v100"): (0.9, 0.9)}  # only d could pack, but c is ahead of it
    model = TableThroughputs(alone, pairs)
    jobs = [job(n, arrival=float(i)) for i, n in enumerate("abcd")]
    fr = get_policy("fifo_packed").allocate(snapshot(jobs, {"v100": 2}, model)).fractions
    assert not any(len(k.split("+")) == 2 for k in fr)


def test_a_fifo_state_saved_before_issue_18_still_loads() -> None:
    old = {"kept": {"j0": "v100"}}
    get_policy("fifo_perf").load_state(old)
    pol = get_policy("fifo")
    pol.load_state(old)
    model = TableThroughputs({"j0": SPEEDS})
    got = _types(pol.allocate(snapshot([job("j0")], GPUS, model)).fractions)
    assert got == {"j0": "v100"}
