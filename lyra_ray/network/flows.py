"""What runs on the network model: flows and computations, tied by dependencies.

A training step is a DAG: a flow starts when the computation that produces its data
ends (an activation, a gradient bucket), and a computation starts when the flows it
consumes have arrived. Modelling both lets a scheduler's effect show where it matters,
in the step time, not only in flow completion times.

Each flow carries the labels the schedulers group by: its Coflow (the unit Varys
schedules: flows that should finish together), its EchelonFlow and arrangement offset
(its ideal finish time is the EchelonFlow's reference time plus ``offset``), a traffic
class (Lina: 0 = all-to-all, ahead of any other class) and the collective op it was
launched with (Lina holds back whole ops, never parts of one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Flow:
    """``size`` bytes from server ``src`` to ``dst``, released when ``deps`` are done
    and not before ``release`` (seconds)."""

    name: str
    src: str
    dst: str
    size: float
    deps: tuple[str, ...] = ()
    release: float = 0.0
    job: str = ""
    coflow: str = ""
    echelon: str = ""
    offset: float = 0.0
    cls: int = 1
    op: str = ""
    weight: float = 1.0
    """Connections this flow stands for: fair sharing gives it ``weight`` shares."""


@dataclass(frozen=True, slots=True)
class Compute:
    """A computation of ``duration`` seconds, started when ``deps`` are done. Zero-length
    computations serve as barriers (a collective's "done")."""

    name: str
    duration: float
    deps: tuple[str, ...] = ()
    release: float = 0.0
    job: str = ""


Task = Flow | Compute


def check_workload(tasks: Iterable[Task]) -> dict[str, Task]:
    """The tasks by name, refusing bad input with the field named: a duplicate name, an
    unknown dependency, a negative or non-finite size, duration or release, a cycle."""
    by_name: dict[str, Task] = {}
    for t in tasks:
        if t.name in by_name:
            raise ValueError(f"name: task {t.name!r} given twice")
        if isinstance(t, Flow):
            if not (math.isfinite(t.size) and t.size >= 0):
                raise ValueError(f"size: flow {t.name!r} has size {t.size}")
            if not math.isfinite(t.offset):
                raise ValueError(f"offset: flow {t.name!r} has offset {t.offset}")
            if not (math.isfinite(t.weight) and t.weight > 0):
                raise ValueError(f"weight: flow {t.name!r} has weight {t.weight}")
        elif not (math.isfinite(t.duration) and t.duration >= 0):
            raise ValueError(f"duration: compute {t.name!r} has duration {t.duration}")
        if not (math.isfinite(t.release) and t.release >= 0):
            raise ValueError(f"release: task {t.name!r} has release {t.release}")
        by_name[t.name] = t
    indeg: dict[str, int] = {}
    users: dict[str, list[str]] = {}
    for t in by_name.values():
        for d in t.deps:
            if d not in by_name:
                raise ValueError(f"deps: task {t.name!r} depends on unknown task {d!r}")
            users.setdefault(d, []).append(t.name)
        indeg[t.name] = len(t.deps)
    todo = [n for n, k in indeg.items() if k == 0]
    seen = 0
    while todo:
        n = todo.pop()
        seen += 1
        for u in users.get(n, ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                todo.append(u)
    if seen != len(by_name):
        stuck = sorted(n for n, k in indeg.items() if k > 0)[:3]
        raise ValueError(f"deps: the dependencies form a cycle through {stuck}")
    return by_name
