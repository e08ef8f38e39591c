"""Lina's training-side scheduling: all-to-all strictly ahead of all-reduce, launched
all-reduce chunks not preemptible, and the MoE step builder it runs on."""

import math

import pytest

from lyra_ray.network.flows import Compute, Flow, Task
from lyra_ray.network.flowsim import simulate
from lyra_ray.network.lina import LinaScheduler
from lyra_ray.network.moe import MoEModel, moe_step
from lyra_ray.network.schedulers import FairSharing
from lyra_ray.network.topology import Topology, gbps

TWO = Topology(["a", "b"], [0, 0], 1.0)


def contention() -> list[Task]:
    """All-reduce op r1 runs from t=0; at t=0.5 an all-to-all and op r2 arrive.
    One byte each way per op on a 1 byte/s full-duplex link."""

    def op(name: str, cls: int, deps: tuple[str, ...]) -> list[Task]:
        return [
            Flow(f"{name}.ab", "a", "b", 1.0, deps, cls=cls, op=name),
            Flow(f"{name}.ba", "b", "a", 1.0, deps, cls=cls, op=name),
        ]

    return [
        *op("r1", 1, ()),
        Compute("t", 0.5),
        *op("a2a", 0, ("t",)),
        *op("r2", 1, ("t",)),
    ]


def test_lina_lets_a_launched_chunk_finish_and_holds_the_next() -> None:
    # r1 has 0.5 left at t=0.5 and, launched, shares with the all-to-all: both at 1/2,
    # r1 ends at 1.5; the all-to-all has 0.5 left, alone at 1: ends at 2.0; r2 waited
    # for it and ends at 3.0.
    r = simulate(contention(), TWO, LinaScheduler())
    assert r.finish["r1.ab"] == 1.5
    assert r.finish["a2a.ab"] == 2.0
    assert r.start["r2.ab"] == 0.5 and r.finish["r2.ab"] == 3.0


def test_fair_sharing_prolongs_the_all_to_all() -> None:
    # At t=0.5 three flows share each direction at 1/3: r1 (0.5 left) ends at 2.0; the
    # all-to-all and r2 then have 0.5 each at 1/2: both end at 3.0.
    r = simulate(contention(), TWO, FairSharing())
    assert r.finish["r1.ab"] == pytest.approx(2.0)
    assert r.finish["a2a.ab"] == pytest.approx(3.0)


def test_without_all_to_all_lina_is_fair_sharing() -> None:
    tasks = [t for t in contention() if not t.name.startswith("a2a")]
    assert (
        simulate(tasks, TWO, LinaScheduler()).finish == simulate(tasks, TWO, FairSharing()).finish
    )


SMALL = MoEModel("tiny", hidden=256, blocks=4, seq_len=256, seqs_per_server=4)


def test_moe_step_chunks_are_equal_and_cover_the_gradients() -> None:
    servers = [f"s{i}" for i in range(4)]
    total = sum(SMALL.dense_grad_bytes(b, 4) for b in range(SMALL.blocks))
    for chunk in (total / 7, 1e5, total * 2):
        tasks = moe_step(SMALL, servers, 1e12, chunk)
        rings = [t for t in tasks if isinstance(t, Flow) and t.cls == 1]
        ops = {t.op for t in rings}
        sizes = {round(t.size, 6) for t in rings}
        assert len(sizes) == 1  # equal chunks
        assert sum(t.size for t in rings) == pytest.approx(2 * 3 / 4 * total * 4)
        assert len(ops) == max(1, math.ceil(total / chunk - 1e-9))
    a2a = [t for t in tasks if isinstance(t, Flow) and t.cls == 0]
    moe_blocks = sum(SMALL.is_moe(b) for b in range(SMALL.blocks))
    assert len({t.op for t in a2a}) == 4 * moe_blocks  # dispatch + combine, both passes


def test_lina_shortens_the_step_when_all_reduce_contends() -> None:
    servers = [f"s{i}" for i in range(4)]
    topo = Topology.racks(servers, 4, gbps(10))
    model = MoEModel("m", hidden=1024, blocks=4, seq_len=512, seqs_per_server=4)
    base = simulate(moe_step(model, servers, 50e12, 25e6), topo, FairSharing())
    lina = simulate(moe_step(model, servers, 50e12, 2e6), topo, LinaScheduler())
    assert lina.makespan < base.makespan
    # The all-to-alls themselves are never slowed by a pending chunk: the last backward
    # all-to-all ends earlier under Lina.
    assert lina.finish["moe/disp_b1.done"] < base.finish["moe/disp_b1.done"]


def test_moe_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="hidden"):
        MoEModel("x", hidden=0, blocks=1, seq_len=1, seqs_per_server=1)
    with pytest.raises(ValueError, match="servers"):
        moe_step(SMALL, ["s0"], 1e12, 1e6)
    with pytest.raises(ValueError, match="chunk_bytes"):
        moe_step(SMALL, ["s0", "s1"], 1e12, 0.0)
