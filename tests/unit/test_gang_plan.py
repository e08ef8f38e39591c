"""Who runs a gang's next generation (#47): members that stay keep their GPU slot, the
others free theirs and wait as spares or end, new slots go to spares on their node."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.contract.labels import GPU_TYPE_LABEL, NODE_ID_LABEL
from lyra_ray.runtime.gang_plan import Member, Plan, kept_gpus, pick_spare, plan, ranks, wanted


def sel(node: str | None, gpu: str = "v100") -> dict[str, str]:
    return {GPU_TYPE_LABEL: gpu} | ({NODE_ID_LABEL: node} if node else {})


def test_a_shrink_keeps_the_lowest_ranks_and_frees_the_rest() -> None:
    members = [Member(k, "a", rank=k) for k in range(4)]
    p = plan(members, [sel("a")] * 2)
    assert p == Plan(keep=(0, 1), release=(2, 3), retire=(), new_slots=())


def test_a_grow_keeps_every_slot_and_asks_for_the_missing_ones() -> None:
    members = [Member(0, "a", 0), Member(1, "a", 1), Member(2, "a", None), Member(3, "b", None)]
    p = plan(members, [sel("a")] * 3 + [sel("b")])
    assert p.keep == (0, 1) and p.release == () and p.new_slots == (sel("a"), sel("b"))
    taken: set[int] = set()
    spares = [m for m in members if m.rank is None]
    assert pick_spare(spares, "a", taken) == 2
    taken.add(2)
    assert pick_spare(spares, "a", taken) is None  # none left on a: a new process
    assert pick_spare(spares, "b", taken) == 3


def test_a_move_to_another_node_frees_everything_here() -> None:
    members = [Member(0, "a", 0), Member(1, "a", 1)]
    p = plan(members, [sel("b")] * 2)
    assert p.keep == () and p.release == (0, 1) and p.new_slots == (sel("b"), sel("b"))


def test_a_process_bound_to_its_gpus_ends_rather_than_waits() -> None:
    members = [Member(0, "a", 0, touched=True), Member(1, "a", 1, touched=True)]
    p = plan(members, [sel("a")])
    assert p.keep == (0,) and p.release == (1,) and p.retire == (1,)
    assert pick_spare([Member(2, "a", None, touched=True)], "a", set()) is None


def test_an_unplaced_worker_gets_a_slot_of_its_gpu_type_anywhere() -> None:
    per_node, loose = wanted([sel("a"), sel(None, "k80")])
    assert per_node == {"a": 1} and loose == [sel(None, "k80")]
    p = plan([Member(0, "a", 0)], [sel("a"), sel(None, "k80")])
    assert p.keep == (0,) and p.new_slots == (sel(None, "k80"),)


def test_ranks_keep_rank_zero_and_group_each_node() -> None:
    # last run: a (rank 1), b (rank 0); joining: a spare on a, a new worker on c
    got = ranks([(10, "a", 1), (11, "b", 0), (12, "a", None), (13, "c", None)])
    assert got[11].rank == 0 and got[11].node_rank == 0  # rank 0 stays rank 0
    assert [got[k].rank for k in (10, 12)] == [1, 2]  # a's stayer before a's joiner
    assert (got[10].local_rank, got[12].local_rank, got[10].local_world) == (0, 1, 2)
    assert got[13].rank == 3 and got[13].node_rank == 2 and got[13].local_world == 1


def test_the_slots_a_resize_keeps() -> None:
    four = {"nodes": [["a", 4]], "partner": None}
    assert kept_gpus(four, {"nodes": [["a", 2]], "partner": None}) == {"a": 2.0}
    assert kept_gpus({"nodes": [["a", 2]], "partner": None}, four) == {"a": 2.0}
    assert kept_gpus(four, {"nodes": [["b", 4]], "partner": None}) == {}
    assert kept_gpus(four, None) == {}  # a preemption keeps nothing
    assert kept_gpus(four, {"nodes": [["a", 4]], "partner": "j2"}) == {}  # half GPUs now


def test_a_worker_takes_only_its_slots_gpus(tmp_path: Path) -> None:
    """Warm workers hold no GPU in Ray's eyes; on an NVIDIA node they take their slot's as
    CUDA_VISIBLE_DEVICES, which CUDA reads once: never after CUDA was touched, never
    other ids than the ones a process is bound to."""
    from lyra_ray.runtime.gang_worker import has_nvidia_gpus, take_gpus

    assert not has_nvidia_gpus(str(tmp_path / "absent"))  # a fake-GPU node: nothing to bind
    (tmp_path / "gpus").mkdir()
    assert not has_nvidia_gpus(str(tmp_path / "gpus"))
    (tmp_path / "gpus" / "0000:17:00.0").mkdir()
    assert has_nvidia_gpus(str(tmp_path / "gpus"))
    assert take_gpus(None, ["2"], cuda_touched=False) == ("2",)
    assert take_gpus(("2",), [2], cuda_touched=True) == ("2",)  # the same GPU next run
    with pytest.raises(RuntimeError, match="touched"):
        take_gpus(None, ["2"], cuda_touched=True)
    with pytest.raises(RuntimeError, match="bound to GPUs"):
        take_gpus(("2",), ["3"], cuda_touched=True)
