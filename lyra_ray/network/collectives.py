"""Collectives as flows: ring all-reduce, all-gather, reduce-scatter, all-to-all, send.

Why fluid rings: a bandwidth-optimal ring collective pipelines small chunks around the
ring, so in steady state every ring edge carries the same bytes at the same time. At
flow level it is one flow per edge, each of the collective's per-edge volume: all-reduce
``2 (N-1)/N x S``, all-gather and reduce-scatter ``(N-1)/N x S``. The ring runs at its
slowest edge in reality; as separate flows, a faster edge may finish early, which
changes nothing downstream because the collective ends (its barrier) when its last
flow does. An all-to-all of ``S`` bytes per server is ``N (N-1)`` flows of ``S / N``.

Every builder returns the flows and a zero-length barrier named ``<name>.done`` that
depends on them: consumers depend on the barrier, whatever the collective's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lyra_ray.network.flows import Compute, Flow, Task


@dataclass(frozen=True, slots=True)
class Labels:
    """The scheduling labels a collective's flows carry (see :class:`Flow`)."""

    job: str = ""
    coflow: str = ""
    echelon: str = ""
    offset: float = 0.0
    cls: int = 1
    weight: float = 1.0


def _barrier(name: str, flows: list[Flow], deps: Sequence[str], job: str) -> list[Task]:
    done = Compute(f"{name}.done", 0.0, tuple(f.name for f in flows) or tuple(deps), job=job)
    return [*flows, done]


def _ring(
    name: str, servers: Sequence[str], per_edge: float, deps: Sequence[str], lab: Labels
) -> list[Task]:
    if not servers:
        raise ValueError(f"servers: collective {name!r} has no servers")
    n = len(servers)
    flows = []
    if n > 1:
        for i, s in enumerate(servers):
            flows.append(
                Flow(
                    f"{name}.{i}",
                    s,
                    servers[(i + 1) % n],
                    per_edge,
                    tuple(deps),
                    job=lab.job,
                    coflow=lab.coflow or name,
                    echelon=lab.echelon,
                    offset=lab.offset,
                    cls=lab.cls,
                    op=name,
                    weight=lab.weight,
                )
            )
    return _barrier(name, flows, tuple(deps), lab.job)


def all_reduce(
    name: str, servers: Sequence[str], nbytes: float, deps: Sequence[str], lab: Labels
) -> list[Task]:
    """Ring all-reduce of ``nbytes`` per server."""
    n = len(servers)
    return _ring(name, servers, 2.0 * (n - 1) / max(n, 1) * nbytes, deps, lab)


def all_gather(
    name: str, servers: Sequence[str], nbytes: float, deps: Sequence[str], lab: Labels
) -> list[Task]:
    """Ring all-gather whose result is ``nbytes`` per server (reduce-scatter alike)."""
    n = len(servers)
    return _ring(name, servers, (n - 1) / max(n, 1) * nbytes, deps, lab)


reduce_scatter = all_gather


def all_to_all(
    name: str, servers: Sequence[str], nbytes: float, deps: Sequence[str], lab: Labels
) -> list[Task]:
    """Every server sends ``nbytes / N`` to each other server (its own share stays)."""
    if not servers:
        raise ValueError(f"servers: collective {name!r} has no servers")
    n = len(servers)
    flows = [
        Flow(
            f"{name}.{i}>{j}",
            a,
            b,
            nbytes / n,
            tuple(deps),
            job=lab.job,
            coflow=lab.coflow or name,
            echelon=lab.echelon,
            offset=lab.offset,
            cls=lab.cls,
            op=name,
            weight=lab.weight,
        )
        for i, a in enumerate(servers)
        for j, b in enumerate(servers)
        if i != j
    ]
    return _barrier(name, flows, tuple(deps), lab.job)


def send(name: str, src: str, dst: str, nbytes: float, deps: Sequence[str], lab: Labels) -> Flow:
    """One point-to-point flow (a pipeline activation or its gradient)."""
    return Flow(
        name,
        src,
        dst,
        nbytes,
        tuple(deps),
        job=lab.job,
        coflow=lab.coflow or name,
        echelon=lab.echelon,
        offset=lab.offset,
        cls=lab.cls,
        op=name,
        weight=lab.weight,
    )
