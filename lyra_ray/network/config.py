"""The network a simulation runs on, from one configuration string.

``servers_per_rack=8,nic_gbps=25,oversubscription=4`` builds racks of 8 servers with 25
Gb/s NICs under a 4:1 oversubscribed spine. Racks hold one GPU type each (clusters are
bought and cabled a rack at a time), filled with that type's servers in cluster order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.network.topology import Topology, gbps


@dataclass(frozen=True, slots=True)
class NetworkSpec:
    servers_per_rack: int = 8
    nic_gbps: float = 25.0
    oversubscription: float = 1.0


def parse_network(raw: str) -> NetworkSpec:
    """``key=value`` pairs, comma-separated; a bad key or value names itself."""
    known = {f.name: f.type for f in fields(NetworkSpec)}
    vals: dict[str, float | int] = {}
    for item in filter(None, (x.strip() for x in raw.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise InputError(
                f"--network: {item!r} is not KEY=VALUE with KEY one of {', '.join(known)}"
            )
        try:
            vals[key] = int(value) if key == "servers_per_rack" else float(value)
        except ValueError:
            raise InputError(f"--network: field {key!r}: not a number: {value!r}") from None
        if vals[key] <= 0:
            raise InputError(f"--network: field {key!r}: must be > 0, got {value!r}")
    return NetworkSpec(**vals)  # type: ignore[arg-type]


def topology_for(nodes: Sequence[Node], spec: NetworkSpec) -> Topology:
    """Racks of ``spec.servers_per_rack`` servers of one GPU type and pool each."""
    racks: list[int] = []
    count: dict[tuple[str, str], int] = {}
    current: dict[tuple[str, str], int] = {}
    opened = 0
    for n in nodes:
        key = (n.pool, n.gpu_type)
        k = count.get(key, 0)
        if k % spec.servers_per_rack == 0:
            current[key], opened = opened, opened + 1
        count[key] = k + 1
        racks.append(current[key])
    return Topology([n.id for n in nodes], racks, gbps(spec.nic_gbps), spec.oversubscription)
