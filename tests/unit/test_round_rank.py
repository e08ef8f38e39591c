"""The round's column ranking (:mod:`lyra_ray.scheduling.round_rank`) decides exactly as
the row ranking it stands in for, on the schedules and inputs that could tell them apart:
whole simulated schedules, and the mechanism driven round by round through arrivals,
departures, pairs, replaced throughput rows, resets and mid-round backfills (pinned jobs,
no adoption). Compared by equality, not tolerance."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_ray import model as m
from lyra_ray.model import Allocation, Assignment, ClusterSnapshot, JobView, Node, pair_key
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.scheduling.round_rank import EntryIndex
from lyra_ray.scheduling.rounds import RoundMechanism
from lyra_ray.scheduling.type_order import fastest_first
from lyra_ray.sim.simulator import Simulator
from tests.builders import job as sim_job
from tests.builders import schedule
from tests.gavel_builders import TableThroughputs, job

GPU = ["v100", "p100", "k80"]
ROWS = 10**9
"""``index_from`` that keeps every round on the row ranking."""


def _sim(
    nodes: list[m.Node], specs: list[m.JobSpec], policy: str, index_from: int
) -> list[tuple[Any, ...]]:
    sim = Simulator(nodes, get_policy(policy), SpecThroughputs(), round_s=120.0)
    rounds = sim.core.rounds
    assert isinstance(rounds, RoundMechanism)
    rounds.index_from = index_from
    res = sim.run(specs)
    return schedule(res.jobs)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(10, 3000), st.sampled_from([1, 1, 2, 4]), st.floats(0, 2000)),
        min_size=1,
        max_size=14,
    ),
    st.sampled_from(["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_perf"]),
)
def test_columns_keep_the_simulated_schedule(
    jobs: list[tuple[float, int, float]], policy: str
) -> None:
    nodes = [m.Node(f"{g}-{i}", g, 2) for g in GPU for i in range(2)]
    tput = {"v100": 3.0, "p100": 2.0, "k80": 1.0}
    specs = [
        sim_job(f"j{i}", steps=s, workers=w, arrival=a, tput=tput)
        for i, (s, w, a) in enumerate(jobs)
    ]
    assert _sim(nodes, specs, policy, 0) == _sim(nodes, specs, policy, ROWS)


def _drive(
    seed: int, index_from: int, restore_at: int = -1
) -> tuple[list[dict[str, Assignment]], dict[str, Any]]:
    """Rounds and backfills over a changing job set with pairs; every draw from ``seed``.
    At round ``restore_at`` the mechanism is replaced by one restored from its JSON state
    (no memo: the columns are rebuilt from the bookkeeping)."""
    rng = random.Random(seed)
    ids = [f"j{i}" for i in range(rng.randint(3, 24))]
    sf = {j: rng.choice((1, 1, 1, 2, 4)) for j in ids}
    alone = {j: {g: rng.choice((0.0, rng.uniform(0.5, 3.0), 1.0)) for g in GPU} for j in ids}
    pairs = {
        (a, b, g): (rng.uniform(0.2, 0.9), rng.uniform(0.2, 0.9))
        for a, b in itertools.pairwise(ids)
        for g in GPU
        if rng.random() < 0.3
    }
    model = TableThroughputs(alone, pairs)
    nodes = tuple(Node(f"{g}-0", g, rng.randint(0, 6)) for g in GPU)
    nodes = tuple(n for n in nodes if n.num_gpus > 0) or (Node("v100-0", "v100", 1),)
    rows = {j: dict(alone[j]) for j in ids}  # the views' rows: replaced, never edited

    def allocation() -> Allocation:
        fr: dict[str, dict[str, float]] = {
            j: {g: rng.choice((0.0, rng.random())) for g in GPU} for j in ids if rng.random() < 0.8
        }
        for a, b, _ in pairs:
            if rng.random() < 0.5:
                fr[pair_key(a, b)] = {g: rng.random() / 2 for g in GPU}
        return Allocation(fractions=fr)

    mech = RoundMechanism(
        min_reset_interval_s=rng.choice((0.0, 700.0)),
        skip_zero_priority=rng.random() < 0.3,
        shuffle_types=rng.random() < 0.3,
        index_from=index_from,
    )
    received: dict[str, dict[str, float]] = {j: {} for j in ids}
    present = [j for j in ids if rng.random() < 0.7]
    alloc, prev = allocation(), dict[str, Assignment]()
    history = []
    for r in range(14):
        now = 200.0 * r
        if r == restore_at:
            mech = RoundMechanism.from_state(json.loads(json.dumps(mech.to_state())))
            mech.index_from = index_from
        if rng.random() < 0.3:
            alloc = allocation()
        for j in ids:  # arrivals and departures, in the core's order (arrival order)
            if j in present and rng.random() < 0.15:
                present.remove(j)
            elif j not in present and rng.random() < 0.2:
                present.append(j)
        for j in present:
            if rng.random() < 0.1:  # a learnt rate replaces the row
                rows[j] = {g: v * rng.uniform(0.5, 1.5) for g, v in rows[j].items()}
        views: list[JobView] = [
            dataclasses.replace(job(j, sf=sf[j], time_received=received[j]), throughput=rows[j])
            for j in present
        ]
        snap = ClusterSnapshot(now=now, nodes=nodes, jobs=tuple(views), throughput_model=model)
        prev = {j: a for j, a in prev.items() if j in present}
        backfill = rng.random() < 0.5
        pinned = dict(prev) if backfill else {j: a for j, a in prev.items() if rng.random() < 0.3}
        out = mech.assign(snap, alloc, prev, pinned or None, adopt=not backfill)
        for jid, a in out.items():
            got = received[jid].get(a.gpu_type, 0.0)
            received[jid] = {**received[jid], a.gpu_type: got + rng.uniform(0.0, 200.0)}
        history.append(out)
        prev = out
    return history, mech.to_state()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_columns_rank_like_rows_through_backfills_pairs_and_resets(seed: int) -> None:
    rows = _drive(seed, ROWS)
    assert _drive(seed, 0) == rows
    assert _drive(seed, 0, restore_at=seed % 14) == rows  # a restart decides alike


@pytest.mark.parametrize("n", [1, 7, 5000])
def test_type_order_sums_in_the_rows_order(n: int) -> None:
    """The columns' sequential sum is the loop's to the last bit (a pairwise sum is not)."""
    rng = np.random.default_rng(n)
    thr = {
        f"j{i}": {g: float(v) for g, v in zip(GPU, rng.uniform(0, 5, 3) ** 3, strict=True)}
        for i in range(n)
    }
    gpus = {"v100": 1, "p100": 1, "k80": 1}
    index = EntryIndex(list(gpus))
    keys = list(thr)
    views = {k: job(k) for k in keys}
    index.sync(keys, n, thr, views, lambda key: set(), ({}, {}, {}))
    assert index.type_order(gpus) == fastest_first(thr.values(), gpus)
    sums = []
    for g in GPU:  # the loop of ``order_by_speed``, written out (``sum`` may compensate)
        total = 0.0
        for r in thr.values():
            total += r[g] / max(r.values())
        sums.append(total)
    cum = [float(np.cumsum(index.speed[t, :n])[-1]) for t in range(3)]
    assert cum == sums
