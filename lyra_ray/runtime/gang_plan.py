"""Who runs the next generation of a job's gang: pure, so every case is a unit test.

A run asks for workers by label selector (``lyra_ray.runtime.runs.worker_selectors``):
a node id and a GPU type per worker, or a GPU type only. Against the gang's members
(warm processes, some holding a GPU slot from the run that just ended), :func:`plan`
decides which members keep their slot (a member whose node the run still uses: the
workers that stay through a resize), which give theirs back, which processes end, and
which slots to reserve anew. :func:`pick_spare` then fills each new slot with a warm
spare on its node when there is one; :func:`ranks` numbers the workers.

Two rules carry the GPU's safety:

* a process that has touched CUDA is bound to its GPUs for life (its
  ``CUDA_VISIBLE_DEVICES`` cannot change, and its CUDA context holds memory on them),
  so when it gives its slot back it ends, never waits as a spare;
* a member keeps its slot only on a node the next run names, at most as many as the
  run asks for there: the scheduler has counted every other GPU as free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lyra_ray.contract.labels import NODE_ID_LABEL


@dataclass(frozen=True)
class Member:
    key: int
    node: str
    rank: int | None
    """Its rank in the run that just ended while it holds a slot; None for a spare."""
    touched: bool = False
    """Its process touched CUDA: it can serve only the GPUs it has."""


@dataclass(frozen=True)
class Plan:
    keep: tuple[int, ...]
    """Members that keep their slot into the next run."""
    release: tuple[int, ...]
    """Members whose slots are freed (they become spares, or end: ``retire``)."""
    retire: tuple[int, ...]
    """Members whose processes end (CUDA-bound, giving their slot back)."""
    new_slots: tuple[Mapping[str, str], ...]
    """Selectors of the slots to reserve, one per worker not covered by ``keep``."""


def wanted(
    selectors: Sequence[Mapping[str, str]],
) -> tuple[dict[str, int], list[Mapping[str, str]]]:
    """Per pinned node, the workers the run asks there (in first-seen order); and the
    selectors that pin no node."""
    per_node: dict[str, int] = {}
    loose: list[Mapping[str, str]] = []
    for s in selectors:
        node = s.get(NODE_ID_LABEL)
        if node is None:
            loose.append(s)
        else:
            per_node[node] = per_node.get(node, 0) + 1
    return per_node, loose


def plan(members: Sequence[Member], selectors: Sequence[Mapping[str, str]]) -> Plan:
    """Which slots the next run keeps, frees and reserves (see the module's rules)."""
    per_node, loose = wanted(selectors)
    holding = sorted((m for m in members if m.rank is not None), key=lambda m: m.rank or 0)
    left = dict(per_node)
    keep: list[int] = []
    release: list[int] = []
    for m in holding:
        if left.get(m.node, 0) > 0:
            left[m.node] -= 1
            keep.append(m.key)
        else:
            release.append(m.key)
    by_key = {m.key: m for m in members}
    retire = tuple(k for k in release if by_key[k].touched)
    new: list[Mapping[str, str]] = []
    first_of: dict[str, Mapping[str, str]] = {}
    for s in selectors:
        node = s.get(NODE_ID_LABEL)
        if node is not None:
            first_of.setdefault(node, s)
    for node, n in left.items():
        new += [first_of[node]] * n
    new += loose
    return Plan(tuple(keep), tuple(release), retire, tuple(new))


def pick_spare(spares: Sequence[Member], node: str, taken: set[int]) -> int | None:
    """A warm spare on ``node`` not yet given a slot (spares never touched CUDA)."""
    for m in spares:
        if m.node == node and m.key not in taken and not m.touched:
            return m.key
    return None


@dataclass(frozen=True)
class Rank:
    rank: int
    local_rank: int
    local_world: int
    node_rank: int


def ranks(workers: Sequence[tuple[int, str, int | None]]) -> dict[int, Rank]:
    """Ranks for ``(member, node, rank in the last run or None)``: workers of a node
    together (local ranks contiguous, as Ray Train orders them), the node of the last
    run's rank 0 first and, within a node, the members that stay in their old order
    before those that join; so a resize keeps rank 0 where it was."""
    nodes: list[str] = []
    for _k, node, _r in sorted(workers, key=lambda w: (w[2] is None, w[2] or 0)):
        if node not in nodes:
            nodes.append(node)
    out: dict[int, Rank] = {}
    rank = 0
    for node_rank, node in enumerate(nodes):
        here = sorted(
            (w for w in workers if w[1] == node), key=lambda w: (w[2] is None, w[2] or 0, w[0])
        )
        for local, (key, _node, _r) in enumerate(here):
            out[key] = Rank(rank, local, len(here), node_rank)
            rank += 1
    return out


def kept_gpus(current: Mapping[str, Any], following: Mapping[str, Any] | None) -> dict[str, float]:
    """GPUs per node that a run's next generation holds again (a resize): a gang keeps
    their slots through the stop. Nothing when the next run shares GPUs differently (a
    pair formed or split: other slot sizes) or there is no next run (a preemption)."""
    if following is None or (current.get("partner") is None) != (following.get("partner") is None):
        return {}
    now = {str(n): int(g) for n, g in current["nodes"]}
    out: dict[str, float] = {}
    for n, g in following["nodes"]:
        k = min(now.get(str(n), 0), int(g))
        if k > 0:
            out[str(n)] = float(k)
    return out
