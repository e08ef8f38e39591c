"""The GPUs a plan runs on: peak speed, memory, and the two kinds of link.

A plan's cost depends on where its collectives run: tensor-parallel all-reduces inside
one server ride NVLink (hundreds of GB/s), while a group that spans servers is limited
by each GPU's share of the network (tens of GB/s). So a GPU type carries both
bandwidths and how many GPUs share a server.

The catalogue holds spec-sheet numbers (half precision with tensor cores where the card
has them). ``intra_bw`` is the bus bandwidth an NCCL ring all-reduce reaches inside a
server (below the NVLink peak); ``inter_bw`` is one GPU's network share (DGX A100: one
200 Gb/s HDR port per GPU = 25 GB/s). Cards without NVLink use PCIe numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

GIB = 2**30


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator type as the cost model sees it (SI units: FLOP/s, bytes, bytes/s)."""

    name: str
    peak_flops: float
    memory_bytes: float
    hbm_bw: float
    intra_bw: float
    inter_bw: float
    gpus_per_server: int = 8
    memory_reserve_bytes: float = 3.0 * GIB
    """Held back from each GPU: CUDA context, communicator buffers, fragmentation."""

    def __post_init__(self) -> None:
        for f in ("peak_flops", "memory_bytes", "hbm_bw", "intra_bw", "inter_bw"):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{f} must be a finite number > 0, got {v!r}")
        g = self.gpus_per_server
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise ValueError(f"gpus_per_server must be an integer >= 1, got {g!r}")
        r = self.memory_reserve_bytes
        if not (math.isfinite(r) and 0 <= r < self.memory_bytes):
            raise ValueError(f"memory_reserve_bytes must be in [0, memory), got {r!r}")

    @property
    def usable_memory(self) -> float:
        return self.memory_bytes - self.memory_reserve_bytes

    def group_bw(self, span: int) -> float:
        """Per-GPU bandwidth of a collective whose GPUs span ``span`` consecutive ranks.

        Ranks are laid out server by server and groups side by side, so a group talks
        over NVLink only if every group sits inside one server (``span`` divides the
        server); a larger group, or one of 6 on servers of 8, crosses the network.
        """
        inside = span <= self.gpus_per_server and self.gpus_per_server % span == 0
        return self.intra_bw if inside else self.inter_bw

    def with_servers_of(self, gpus_per_server: int) -> GpuSpec:
        return replace(self, gpus_per_server=gpus_per_server)


_T = 1e12
_G = 1e9

CATALOGUE: dict[str, GpuSpec] = {
    "h100": GpuSpec("h100", 989 * _T, 80 * GIB, 3350 * _G, 450 * _G, 50 * _G, 8),
    "h200": GpuSpec("h200", 989 * _T, 141 * GIB, 4800 * _G, 450 * _G, 50 * _G, 8),
    "a100": GpuSpec("a100", 312 * _T, 80 * GIB, 2039 * _G, 230 * _G, 25 * _G, 8),
    "v100": GpuSpec("v100", 125 * _T, 32 * GIB, 900 * _G, 130 * _G, 12.5 * _G, 8),
    "t4": GpuSpec("t4", 65 * _T, 16 * GIB, 320 * _G, 12 * _G, 12.5 * _G, 4, 1.5 * GIB),
    "p100": GpuSpec("p100", 18.7 * _T, 16 * GIB, 732 * _G, 12 * _G, 12.5 * _G, 4, 1.5 * GIB),
    "k80": GpuSpec("k80", 4.4 * _T, 12 * GIB, 240 * _G, 8 * _G, 1.25 * _G, 4, 1.5 * GIB),
}
"""Known GPU types by the lower-case names the cluster uses. K80 has no fast half
precision: its number is single precision per GPU (half a board).

H200 is an H100 die with more and faster memory (spec sheet: 989 TFLOP/s dense bf16,
141 GB HBM3e, 4.8 TB/s); its NVLink and network numbers are the H100's, as it sits in
the same HGX servers. It is the one type whose per-layer time is fitted to a
measurement (``lyra_ray.parallelism.cost.FITTED``): the same GPU type name and the same
measurement (``shared/data/gpu/h200.json``, 2026-11-26) as the throughput catalogue's
``h200`` (``lyra_ray/model/data/h200_throughputs.json``)."""


def gpu_spec(name: str) -> GpuSpec:
    """The catalogue entry for ``name`` (case-insensitive); ``KeyError`` if unknown."""
    return CATALOGUE[name.lower()]
