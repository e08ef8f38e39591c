"""The real pipeline of ``test_planner_pipeline.py``: a small GPT-like model and the Ray
actor that runs one pipeline rank of it (torch.distributed.pipelining over gloo)."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import ray
import torch
from torch import nn

STAGES = 2
"""Two stages because the host has two cores (see the test module)."""

HIDDEN, HEADS, SEQ, VOCAB, BLOCKS, BATCH = 128, 4, 64, 4096, 6, 32
"""The large vocabulary makes the output head (with its loss) cost about two blocks:
Megatron-LM's even split (4 layers a stage) then gives the last stage about 5.3 blocks'
work against 3.1, and the balanced one (5, 3) about 4.1 and 4.3, a gap of ~20 % that
host noise cannot close (with 8 blocks it was ~13 %, and measured once as 4 % the wrong
way). Six blocks and the head also split into four virtual stages of about two blocks
each, so the interleaved schedule is balanced too."""


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Parameter(torch.zeros(SEQ, HIDDEN))

    def forward(self, x: Any) -> Any:
        return self.tok(x) + self.pos


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, x: Any) -> Any:
        return self.out(self.norm(x))


def build_layers() -> list[nn.Module]:
    torch.manual_seed(0)
    block = {"d_model": HIDDEN, "nhead": HEADS, "dim_feedforward": 4 * HIDDEN, "dropout": 0.0}
    blocks = [nn.TransformerEncoderLayer(batch_first=True, **block) for _ in range(BLOCKS)]
    return [Embed(), *blocks, Head()]


def keep_freed_memory() -> None:
    """Make glibc keep freed memory for reuse instead of handing it back to the kernel.

    Why: by default glibc tunes its thresholds from the process's allocation history, and
    in some worker processes it returns a large temporary (the head's 4 MiB logits and
    their softmax) to the kernel on every free, so every step faults its pages in again.
    Such a process ran the head's softmax 2x slower than its twin for its whole life, by
    chance (about one spawned process in two, here); the profile, taken on one worker,
    could then misjudge the other's stages. Fixed thresholds make every worker alike. No-op
    where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD: glibc's largest; bigger blocks map anew
    mallopt(-1, 2**30)  # M_TRIM_THRESHOLD: give memory back only past 1 GiB free


def loss_fn(out: Any, target: Any) -> Any:
    return nn.functional.cross_entropy(out.reshape(-1, VOCAB), target.reshape(-1))


def batch() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return x, torch.roll(x, -1, dims=1)


@ray.remote(num_cpus=1)
class StageWorker:
    """One pipeline rank: a gloo process group member that runs schedules."""

    def __init__(self, rank: int, port: int) -> None:
        import torch.distributed as dist

        torch.set_num_threads(1)
        keep_freed_memory()
        self.rank = rank
        self.dist = dist
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=STAGES
        )
        self.layers = build_layers()

    def profile(self, sizes: tuple[int, ...], reps: int) -> dict[int, list[tuple[float, float]]]:
        """Per layer, the minimum forward and backward seconds at each microbatch size."""
        out: dict[int, list[tuple[float, float]]] = {}
        x_tokens, target = batch()
        last = len(self.layers) - 1
        for b in sizes:
            rows = []
            x: Any = x_tokens[:b]
            for i, layer in enumerate(self.layers):
                fwd = bwd = float("inf")
                for _ in range(reps):
                    inp = x.detach().requires_grad_(x.is_floating_point())
                    t0 = time.perf_counter()
                    y = layer(inp)
                    if i == last:  # the last stage also computes the loss
                        y = loss_fn(y, target[:b])
                    t1 = time.perf_counter()
                    torch.autograd.backward(y, torch.ones_like(y))
                    t2 = time.perf_counter()
                    fwd, bwd = min(fwd, t1 - t0), min(bwd, t2 - t1)
                layer.zero_grad(set_to_none=True)
                rows.append((fwd, bwd))
                x = y.detach()
            out[b] = rows
        return out

    def link(self, sizes: tuple[int, ...], reps: int) -> dict[int, float]:
        """Seconds to send one microbatch's activation to the other rank (half a round trip)."""
        out = {}
        for b in sizes:
            buf = torch.zeros(b, SEQ, HIDDEN)
            best = float("inf")
            for _ in range(reps):
                self.dist.barrier()
                t0 = time.perf_counter()
                if self.rank == 0:
                    self.dist.send(buf, 1)
                    self.dist.recv(buf, 1)
                else:
                    self.dist.recv(buf, 0)
                    self.dist.send(buf, 0)
                best = min(best, (time.perf_counter() - t0) / 2)
            out[b] = best
        return out

    def run(self, schedule: str, m: int, stages: list[int], reps: int) -> tuple[float, float]:
        """(wall, idle) seconds of this rank's fastest training step (forward + backward of
        the batch, until both ranks are done). Idle is the time it waited on the other
        rank: in the schedule's point-to-point waits, and at the end for the drain."""
        from torch.distributed.pipelining import (
            PipelineStage,
            Schedule1F1B,
            ScheduleGPipe,
            ScheduleInterleaved1F1B,
            schedules,
        )

        k = len(stages)
        starts = [sum(stages[:j]) for j in range(k)]
        mine = [j for j in range(k) if j % STAGES == self.rank]
        pipe = [
            PipelineStage(
                nn.Sequential(*self.layers[starts[j] : starts[j] + stages[j]]),
                j,
                k,
                torch.device("cpu"),
            )
            for j in mine
        ]
        if schedule == "interleaved":
            sched: Any = ScheduleInterleaved1F1B(pipe, m, loss_fn=loss_fn)
        else:
            cls = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
            sched = cls(pipe[0], m, loss_fn=loss_fn)
        waited = [0.0]
        wait = schedules._wait_batch_p2p  # every schedule waits for its transfers here

        def timed_wait(work: Any) -> None:
            t = time.perf_counter()
            wait(work)
            waited[0] += time.perf_counter() - t

        x, y = batch()
        best = (float("inf"), 0.0)
        schedules._wait_batch_p2p = timed_wait
        try:
            for i in range(reps + 1):  # the first step warms up (shape inference, buffers)
                for layer in self.layers:
                    layer.zero_grad(set_to_none=True)
                self.dist.barrier()
                waited[0] = 0.0
                t0 = time.perf_counter()
                args = (x,) if 0 in mine else ()
                kwargs = {"target": y} if k - 1 in mine else {}
                sched.step(*args, **kwargs)
                t1 = time.perf_counter()
                self.dist.barrier()
                wall = time.perf_counter() - t0
                if i and wall < best[0]:
                    best = (wall, waited[0] + wall - (t1 - t0))
        finally:
            schedules._wait_batch_p2p = wait
        return best

    def overhead(self, reps: int) -> float:
        """Seconds a microbatch costs the runtime per stage beyond compute and bytes: the
        schedule's own work and a transfer's latency, from a GPipe run of two tiny stages
        at 2 and 16 microbatches (the slope of step time over microbatches)."""
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        torch.manual_seed(0)
        stage = PipelineStage(nn.Linear(8, 8), self.rank, STAGES, torch.device("cpu"))
        x, y = torch.randn(16, 8), torch.randn(16, 8)
        args, kwargs = ((x,), {}) if self.rank == 0 else ((), {"target": y})
        best = {}
        for m in (2, 16):
            sched = ScheduleGPipe(stage, m, loss_fn=nn.functional.mse_loss)
            best[m] = float("inf")
            for i in range(reps + 1):
                self.dist.barrier()
                t0 = time.perf_counter()
                sched.step(*args, **kwargs)
                self.dist.barrier()
                if i:
                    best[m] = min(best[m], time.perf_counter() - t0)
        return (best[16] - best[2]) / 14

    def spin(self, seconds: float) -> tuple[float, float]:
        """Compute for about ``seconds`` of CPU time the output head's kind of work (a
        matmul into a vocabulary-wide output, and its softmax); returns wall over CPU time
        (1.0 when this worker had its core to itself) and steps per wall second: a worker
        can also run slower with its core still its own, which only the rate shows."""
        x, w = torch.randn(4 * SEQ, HIDDEN), torch.randn(HIDDEN, VOCAB)
        steps, t0, c0 = 0, time.perf_counter(), time.thread_time()
        while time.thread_time() - c0 < seconds:
            torch.log_softmax(x @ w, -1)
            steps += 1
        wall = time.perf_counter() - t0
        return wall / max(time.thread_time() - c0, 1e-9), steps / wall

    def close(self) -> None:
        self.dist.destroy_process_group()
