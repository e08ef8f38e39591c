"""Exact multiple-choice knapsack (MCKP) by dynamic programming over integer capacity.

Lyra's phase 2 hands out the GPUs left after base demand: one *group* per running elastic
job, one *item* per "k extra workers" (weight = GPUs, value = the JCT reduction it buys),
at most one item per group. Groups are few (running elastic jobs) and capacities small
(free GPUs of one type), so the pseudo-polynomial DP is exact and fast enough; a greedy
by value density is not exact once scaling curves are sub-linear or non-concave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Item = tuple[int, float]
"""``(weight, value)``: GPUs an option takes and what it is worth."""


@dataclass(frozen=True, slots=True)
class MckpSolution:
    value: float
    choice: tuple[int | None, ...]
    """Per group: the index of the chosen item, or ``None`` (take nothing)."""
    weight: int


_EPS = 1e-12


def solve(groups: Sequence[Sequence[Item]], capacity: int) -> MckpSolution:
    """Maximise total value with at most one item per group and total weight <= capacity.

    Every group implicitly offers "nothing" (weight 0, value 0), so the empty choice is
    always feasible. Items with negative weight are refused (a caller bug). Ties are
    broken towards less weight, then towards earlier groups taking nothing, so the
    answer is deterministic.
    """
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    for g, items in enumerate(groups):
        for w, _ in items:
            if w < 0:
                raise ValueError(f"group {g}: negative item weight {w}")
    n = len(groups)
    # best[c] = best value with total weight exactly <= c over the groups seen so far.
    best = [0.0] * (capacity + 1)
    picks: list[list[int | None]] = []
    for items in groups:
        new = best[:]
        pick: list[int | None] = [None] * (capacity + 1)
        for i, (w, v) in enumerate(items):
            if w > capacity:
                continue
            for c in range(w, capacity + 1):
                cand = best[c - w] + v
                if cand > new[c] + _EPS:
                    new[c] = cand
                    pick[c] = i
        best = new
        picks.append(pick)
    # Smallest capacity reaching the optimum: least weight among ties.
    top = max(best)
    c = next(c for c in range(capacity + 1) if best[c] >= top - 1e-9)
    used = c
    choice: list[int | None] = [None] * n
    for g in range(n - 1, -1, -1):
        item = picks[g][c]
        choice[g] = item
        if item is not None:
            c -= groups[g][item][0]
    return MckpSolution(value=top, choice=tuple(choice), weight=used - c)


def brute_force(groups: Sequence[Sequence[Item]], capacity: int) -> float:
    """The optimum by enumeration: the reference the tests hold :func:`solve` to."""
    best = 0.0

    def rec(g: int, cap: int, val: float) -> None:
        nonlocal best
        if g == len(groups):
            best = max(best, val)
            return
        rec(g + 1, cap, val)
        for w, v in groups[g]:
            if w <= cap:
                rec(g + 1, cap - w, val + v)

    rec(0, capacity, 0.0)
    return best
