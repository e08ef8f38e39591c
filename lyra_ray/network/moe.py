"""An MoE training step as a flow DAG: the input to Lina's training-side comparison.

The model is a stack of transformer blocks; every ``moe_every``-th block's FFN is a
mixture of experts with one expert per server (expert parallelism over all servers),
the others are dense. Per server and step:

- forward: attention, then for an MoE block an all-to-all dispatch, the expert FFN and
  an all-to-all combine (``tokens x top_k x hidden`` elements each way);
- backward, blocks last to first: the same two all-to-alls in reverse around the
  expert's backward, then attention's backward, after which the block's dense
  gradients (attention, gate, dense FFN) are ready;
- the dense gradients are all-reduced (ring, data parallel over all servers) as a
  stream of equal chunks of ``chunk_bytes`` in backward order, one op after another
  on one communicator; each op first pays ``launch_s`` (a collective's start-up).
  DDP's 25 MB buckets are the unchunked baseline; Lina's micro-ops are small chunks.
- fair sharing is per connection; an all-to-all has ``N - 1`` connections out of each
  NIC and a ring one, so each ring edge counts as ``N - 1`` connections (NCCL opens
  several channels): the two process groups get equal shares of a NIC they both use,
  the contention Lina measured. ``ring_weight`` overrides it.

Compute times come from FLOPs at an effective rate per GPU (one GPU per server),
backward = 2 x forward. EchelonFlow's arrangement for the step: an all-to-all's ideal
finish is when its consumer starts on a communication-free timeline; the all-reduces
are needed only at the optimizer step, the end of the backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lyra_ray.network.collectives import Labels, all_reduce, all_to_all
from lyra_ray.network.flows import Compute, Task


@dataclass(frozen=True, slots=True)
class MoEModel:
    name: str
    hidden: int
    blocks: int
    seq_len: int
    seqs_per_server: int
    moe_every: int = 2
    top_k: int = 2
    ffn_mult: int = 4
    bytes_per_elem: int = 2

    def __post_init__(self) -> None:
        for f in ("hidden", "blocks", "seq_len", "seqs_per_server", "moe_every", "top_k"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f}: must be >= 1, got {getattr(self, f)}")

    @property
    def tokens(self) -> int:
        return self.seq_len * self.seqs_per_server

    def is_moe(self, block: int) -> bool:
        return block % self.moe_every == self.moe_every - 1

    def attention_flops(self) -> float:
        """Forward FLOPs: QKV and output projections plus scores and weighted sum."""
        h, t = self.hidden, self.tokens
        return 2.0 * t * 4 * h * h + 4.0 * t * self.seq_len * h

    def ffn_flops(self, block: int) -> float:
        """Forward FLOPs of the FFN; an expert FFN sees ``top_k`` x the tokens."""
        k = self.top_k if self.is_moe(block) else 1
        return 4.0 * self.ffn_mult * self.hidden**2 * self.tokens * k

    def a2a_bytes(self) -> float:
        """Bytes each server's all-to-all moves (its own share included)."""
        return float(self.tokens * self.top_k * self.hidden * self.bytes_per_elem)

    def dense_grad_bytes(self, block: int, servers: int) -> float:
        """Gradients all-reduced: attention, plus the gate or the dense FFN."""
        h = self.hidden
        params = 4 * h * h + (h * servers if self.is_moe(block) else 2 * self.ffn_mult * h * h)
        return float(params * self.bytes_per_elem)


def moe_step(
    model: MoEModel,
    servers: Sequence[str],
    flops_per_s: float,
    chunk_bytes: float,
    launch_s: float = 50e-6,
    job: str = "moe",
    ring_weight: float | None = None,
) -> list[Task]:
    """One training step of ``model`` on ``servers``; see the module docstring."""
    if len(servers) < 2:
        raise ValueError(f"servers: expert parallelism needs >= 2 servers, got {len(servers)}")
    if flops_per_s <= 0:
        raise ValueError(f"flops_per_s: must be > 0, got {flops_per_s}")
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes: must be > 0, got {chunk_bytes}")
    if launch_s < 0:
        raise ValueError(f"launch_s: must be >= 0, got {launch_s}")
    step = f"{job}/step"
    tasks: list[Task] = []
    clock = 0.0  # the communication-free timeline: EchelonFlow's ideal finish times
    prev: list[str] = []

    def compute(name: str, flops: float) -> None:
        nonlocal clock, prev
        tasks.append(Compute(f"{job}/{name}", flops / flops_per_s, tuple(prev), job=job))
        clock += flops / flops_per_s
        prev = [f"{job}/{name}"]

    def a2a(name: str) -> None:
        nonlocal prev
        lab = Labels(job, echelon=step, offset=clock, cls=0)
        tasks.extend(all_to_all(f"{job}/{name}", servers, model.a2a_bytes(), prev, lab))
        prev = [f"{job}/{name}.done"]

    for b in range(model.blocks):
        compute(f"attn_f{b}", model.attention_flops())
        if model.is_moe(b):
            a2a(f"disp_f{b}")
        compute(f"ffn_f{b}", model.ffn_flops(b))
        if model.is_moe(b):
            a2a(f"comb_f{b}")
    ready: list[tuple[str, float]] = []  # (task after which a block's gradients exist, bytes)
    for b in range(model.blocks - 1, -1, -1):
        if model.is_moe(b):
            a2a(f"comb_b{b}")
        compute(f"ffn_b{b}", 2 * model.ffn_flops(b))
        if model.is_moe(b):
            a2a(f"disp_b{b}")
        compute(f"attn_b{b}", 2 * model.attention_flops())
        ready.append((prev[0], model.dense_grad_bytes(b, len(servers))))
    weight = float(len(servers) - 1) if ring_weight is None else ring_weight
    lab = Labels(job, echelon=step, offset=clock, cls=1, weight=weight)
    tasks += _gradient_stream(ready, servers, chunk_bytes, launch_s, lab)
    return tasks


def _gradient_stream(
    ready: list[tuple[str, float]],
    servers: Sequence[str],
    chunk_bytes: float,
    launch_s: float,
    lab: Labels,
) -> list[Task]:
    """Equal chunks over the concatenated gradients, in order; a chunk is ready when the
    block holding its last byte is, and starts after the previous chunk is done."""
    total = sum(nbytes for _, nbytes in ready)
    count = max(1, math.ceil(total / chunk_bytes - 1e-9))
    size = total / count
    tasks: list[Task] = []
    prev_done: list[str] = []
    edge, b = 0.0, 0
    for c in range(count):
        end = (c + 1) * size
        while b < len(ready) - 1 and edge + ready[b][1] < end * (1 - 1e-12):
            edge += ready[b][1]
            b += 1
        op = f"{lab.job}/ar{c}"
        launch = Compute(f"{op}.launch", launch_s, (*prev_done, ready[b][0]), job=lab.job)
        tasks += [launch, *all_reduce(op, servers, size, [launch.name], lab)]
        prev_done = [f"{op}.done"]
    return tasks
