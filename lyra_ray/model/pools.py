"""The one grammar for a pool of GPU servers, for every command that takes one.

``TYPE=NODESxGPUS[,TYPE=...]``: NODES servers of GPUS GPUs of TYPE each. The shorthand
``TYPE=N`` is N GPUs of TYPE, in servers of the command's default size (``lyra
simulate --gpus-per-node``, default 1; one GPU per node in ``lyra up``; the type's usual
server in ``lyra plan``), the last server holding what is left. So ``v100=8`` is eight
V100s in every command, and ``v100=2x4`` is the same eight in two servers of four.
Team quotas (``--quota TYPE=N,...``) count GPUs the same way.

WHY one parser: ``lyra up --inference`` used to mean ``TYPE=NODESxGPUS`` where ``lyra
simulate --inference`` meant ``TYPE=COUNT``, each with its own checks. Each error names
the flag or field the text came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lyra_ray.model.errors import InputError
from lyra_ray.model.types import Node, Pool

MAX_GPUS_PER_TYPE = 1_000_000
"""GPUs of one type in a pool. The largest clusters built hold ~1e5 GPUs; a million
still simulates (one node object per server) and is what ``lyra plan`` accepted."""
MAX_GPUS_PER_NODE = 4096
"""GPUs in one server (a GB200 NVL72 rack is 72; ``lyra plan`` models larger domains)."""
GRAMMAR = "TYPE=NODESxGPUS or TYPE=COUNT (COUNT GPUs), e.g. v100=2x4 or v100=8"

# ASCII digits, at most 9 each: ``\d+`` took any length, and int() refuses strings of
# more than 4,300 digits with a ValueError that escaped as a traceback.
_ITEM = re.compile(
    r"^\s*([A-Za-z][\w-]*)\s*=\s*([0-9]{1,9})\s*(?:[xX]\s*([0-9]{1,9})\s*)?$", re.ASCII
)


@dataclass(frozen=True, slots=True)
class PoolItem:
    """GPUs of one type: ``gpus`` in all, in servers of ``gpus_per_node`` (``None``:
    written as ``TYPE=N``, the command's default server size)."""

    gpu_type: str
    gpus: int
    gpus_per_node: int | None = None

    def node_sizes(self, default_per_node: int = 1) -> list[int]:
        """GPUs of each server; a count that does not divide evenly leaves a smaller
        last server, as a real cluster with a partly filled server would."""
        per = self.gpus_per_node or default_per_node
        full, left = divmod(self.gpus, per)
        return [per] * full + ([left] if left else [])


@dataclass(frozen=True, slots=True)
class NodePool:
    """A parsed pool: one item per GPU type, in the order written."""

    items: tuple[PoolItem, ...]

    def gpus(self) -> dict[str, int]:
        """GPUs per type (what a quota or a feasibility check counts)."""
        return {i.gpu_type: i.gpus for i in self.items}

    def servers(self, default_per_node: int = 1) -> list[tuple[str, int]]:
        """``(gpu type, GPUs)`` of every server, in order."""
        return [(i.gpu_type, n) for i in self.items for n in i.node_sizes(default_per_node)]

    def nodes(
        self, default_per_node: int = 1, pool: Pool = "training", prefix: str = ""
    ) -> list[Node]:
        """The servers as :class:`Node` values named ``{prefix}{type}-{i}``."""
        out: list[Node] = []
        for item in self.items:
            for i, n in enumerate(item.node_sizes(default_per_node)):
                out.append(Node(f"{prefix}{item.gpu_type}-{i}", item.gpu_type, n, pool))
        return out


def check_gpus_per_node(value: object, flag: str = "--gpus-per-node") -> int:
    """A server size: a whole number in [1, :data:`MAX_GPUS_PER_NODE`]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{flag}: must be a whole number of GPUs, got {value!r}"[:300])
    if not 1 <= value <= MAX_GPUS_PER_NODE:
        raise InputError(f"{flag}: must be between 1 and {MAX_GPUS_PER_NODE}, got {value}")
    return value


def parse_pool(text: object, flag: str) -> NodePool:
    """Parse ``TYPE=NODESxGPUS`` / ``TYPE=N`` items separated by commas.

    ``flag`` names where the text came from (``--cluster``, ``lyra: field 'quota'``):
    every error starts with it. Types are lower-cased; a type given twice, an empty
    pool, a zero, negative, fractional, NaN or infinite count, and more than
    :data:`MAX_GPUS_PER_TYPE` GPUs of a type or :data:`MAX_GPUS_PER_NODE` per server
    are refused.
    """
    if not isinstance(text, str):
        raise InputError(f"{flag}: expected {GRAMMAR}, got {type(text).__name__} {text!r}"[:300])
    where = f"{flag}: cluster spec {text!r}"[:200]
    if not text.strip():
        raise InputError(f"{where}: empty; expected {GRAMMAR}")
    items: list[PoolItem] = []
    seen: set[str] = set()
    for raw in text.split(","):
        m = _ITEM.match(raw)
        if not m:
            item = " ".join(raw.split())[:60]
            raise InputError(f"{where}: item {item!r} is not {GRAMMAR}")
        gpu = m.group(1).lower()
        if gpu in seen:
            raise InputError(f"{where}: GPU type {gpu!r} given twice")
        seen.add(gpu)
        first = int(m.group(2))
        per = int(m.group(3)) if m.group(3) is not None else None
        gpus = first * per if per is not None else first
        if first < 1 or (per is not None and per < 1):
            raise InputError(f"{where}: GPU type {gpu!r}: counts must be >= 1")
        if per is not None and per > MAX_GPUS_PER_NODE:
            raise InputError(
                f"{where}: GPU type {gpu!r}: at most {MAX_GPUS_PER_NODE} GPUs per server, got {per}"
            )
        if gpus > MAX_GPUS_PER_TYPE:
            raise InputError(
                f"{where}: GPU type {gpu!r}: at most {MAX_GPUS_PER_TYPE} GPUs of a type, got {gpus}"
            )
        items.append(PoolItem(gpu, gpus, per))
    return NodePool(tuple(items))
