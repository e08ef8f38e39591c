"""Servers, NICs, racks and an oversubscribed switch tier, as numbered links.

The shape is the common two-tier datacenter fabric: each server has one NIC (an uplink
and a downlink to its rack switch, full duplex), each rack switch has an uplink and a
downlink to the spine, and the spine is non-blocking. The rack's spine links carry
``(sum of its NICs' bandwidth) / oversubscription``: at 1:1 the fabric is non-blocking,
at 4:1 a rack can send only a quarter of what its servers can. Traffic between GPUs of
one server stays on the server's own ``local`` link (NVLink or PCIe).

Why numbered links: the schedulers and the max-min solver work on a links x flows
matrix, so a path is a tuple of link indices and capacities are one numpy vector.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Path = tuple[int, ...]


def gbps(x: float) -> float:
    """Gigabits per second in bytes per second (the unit every capacity here is in)."""
    return x * 1e9 / 8.0


class Topology:
    """A two-tier fabric over named servers; see the module docstring for the shape.

    ``rack_of[i]`` is server ``servers[i]``'s rack (0-based, dense). Link indices: server
    ``i``'s NIC uplink ``i`` and downlink ``S + i``, its local link ``2S + i``; rack
    ``r``'s spine uplink ``3S + r`` and downlink ``3S + R + r``.
    """

    def __init__(
        self,
        servers: Sequence[str],
        rack_of: Sequence[int],
        nic_bps: float | Sequence[float],
        oversubscription: float = 1.0,
        local_bps: float = gbps(2400.0),
    ) -> None:
        if not servers:
            raise ValueError("servers: a topology needs at least one server")
        if len(set(servers)) != len(servers):
            raise ValueError("servers: server ids must be unique")
        if len(rack_of) != len(servers):
            raise ValueError(f"rack_of: {len(rack_of)} racks given for {len(servers)} servers")
        if min(rack_of) < 0:
            raise ValueError("rack_of: rack indices must be >= 0")
        nics = [float(nic_bps)] * len(servers) if isinstance(nic_bps, int | float) else nic_bps
        if len(nics) != len(servers) or min(nics) <= 0:
            raise ValueError("nic_bps: one positive bandwidth per server (or one for all)")
        if oversubscription <= 0:
            raise ValueError(f"oversubscription: must be > 0, got {oversubscription}")
        if local_bps <= 0:
            raise ValueError(f"local_bps: must be > 0, got {local_bps}")
        self.servers = tuple(servers)
        self.rack_of = tuple(int(r) for r in rack_of)
        self.oversubscription = float(oversubscription)
        self.index = {s: i for i, s in enumerate(self.servers)}
        s_count = len(self.servers)
        self.num_racks = max(self.rack_of) + 1
        rack_nic = np.zeros(self.num_racks)
        for i, r in enumerate(self.rack_of):
            rack_nic[r] += nics[i]
        self.nic_bps = np.asarray(nics, dtype=float)
        self.uplink_bps = rack_nic / self.oversubscription
        self.capacity: npt.NDArray[np.float64] = np.concatenate(
            [
                self.nic_bps,
                self.nic_bps,
                np.full(s_count, float(local_bps)),
                self.uplink_bps,
                self.uplink_bps,
            ]
        )
        self._paths: dict[tuple[int, int], Path] = {}

    @classmethod
    def racks(
        cls,
        servers: Sequence[str] | int,
        servers_per_rack: int,
        nic_bps: float,
        oversubscription: float = 1.0,
        local_bps: float = gbps(2400.0),
    ) -> Topology:
        """Consecutive servers fill racks of ``servers_per_rack`` (the last may be short);
        an int names servers ``s0, s1, ...``."""
        if servers_per_rack < 1:
            raise ValueError(f"servers_per_rack: must be >= 1, got {servers_per_rack}")
        names = [f"s{i}" for i in range(servers)] if isinstance(servers, int) else list(servers)
        racks = [i // servers_per_rack for i in range(len(names))]
        return cls(names, racks, nic_bps, oversubscription, local_bps)

    # ------------------------------------------------------------------ links

    @property
    def num_links(self) -> int:
        return int(self.capacity.shape[0])

    def nic_up(self, i: int) -> int:
        return i

    def nic_down(self, i: int) -> int:
        return len(self.servers) + i

    def local(self, i: int) -> int:
        return 2 * len(self.servers) + i

    def rack_up(self, r: int) -> int:
        return 3 * len(self.servers) + r

    def rack_down(self, r: int) -> int:
        return 3 * len(self.servers) + self.num_racks + r

    def server(self, name: str) -> int:
        try:
            return self.index[name]
        except KeyError:
            raise ValueError(f"server: {name!r} is not in the topology") from None

    def path(self, src: str, dst: str) -> Path:
        """The links a flow from ``src`` to ``dst`` crosses (cached: paths are fixed)."""
        a, b = self.server(src), self.server(dst)
        key = (a, b)
        p = self._paths.get(key)
        if p is None:
            ra, rb = self.rack_of[a], self.rack_of[b]
            if a == b:
                p = (self.local(a),)
            elif ra == rb:
                p = (self.nic_up(a), self.nic_down(b))
            else:
                p = (self.nic_up(a), self.rack_up(ra), self.rack_down(rb), self.nic_down(b))
            self._paths[key] = p
        return p

    def link_name(self, link: int) -> str:
        """A readable name for reports: ``up:s3``, ``rack_down:1``."""
        s_count, r_count = len(self.servers), self.num_racks
        kind, idx = divmod(link, s_count)
        if link < 3 * s_count:
            return f"{('up', 'down', 'local')[kind]}:{self.servers[idx]}"
        k = link - 3 * s_count
        return f"{'rack_up' if k < r_count else 'rack_down'}:{k % r_count}"
