"""The example Ray Train entrypoint: a small MLP regressing a fixed random function.

It is CPU-trainable in milliseconds per step so that tests and the demo exercise the
real Ray Train machinery (gloo process group, DDP, checkpoints, preemption) on a laptop
with fake GPUs. ``torch.cuda`` is unavailable there, so the loop picks ``cpu`` and wraps
DDP itself instead of ``ray.train.torch.prepare_model`` (which insists on the GPU).

Name it in a JobSpec as ``entrypoint: lyra_ray.jobs.train_example:train_loop``. Config keys:
``total_steps`` (set by the runtime), ``checkpoint_every`` (default 20), ``batch_size``
(32), ``hidden`` (32), ``lr`` (0.01), ``step_sleep_s`` (0: extra seconds per step that
stand in for a bigger model, so that a job lives long enough to be preempted),
``work_per_step_s`` (0: seconds of one step's work on one worker, divided among the
workers, so that the job speeds up with more of them as ``scaling: linear`` says),
``step_log`` (a file rank 0 appends "generation step" lines to: lets tests prove that
no step was lost or repeated across preemptions), ``state_mb`` (0: megabytes of extra
state the job carries in its checkpoints, a buffer each step touches and every restore
must bring back intact: stands in for a big model's weights where a resize's checkpoint
and restore are measured, ``benchmarks/resize_phases.py``), ``pace_file`` (none: a file
whose number, once it exists, replaces ``step_sleep_s`` from the next step on; it paces a
running job without restarting it: the live tests keep a job slow until they have seen
the preemptions or loans it is there for, then let it finish at once instead of sizing
its steps for the slowest host).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from lyra_ray.train import StepLoop

log = logging.getLogger(__name__)

IN_DIM = 16


def make_model(hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(IN_DIM, hidden), nn.ReLU(), nn.Linear(hidden, 1))


class _Pace:
    """``step_sleep_s``, or the number in ``pace_file`` once that file exists (on a path
    every worker sees). A file caught half-written, or holding no finite number, keeps
    the last pause read."""

    def __init__(self, path: str | None, pause: float) -> None:
        self.path, self.pause = (Path(path) if path else None), pause

    def now(self) -> float:
        if self.path is not None:
            try:
                got = float(self.path.read_text())
            except (FileNotFoundError, ValueError):
                return self.pause
            if math.isfinite(got):
                self.pause = max(0.0, got)
        return self.pause


def synthetic_batch(step: int, rank: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic batch per (step, rank): a rerun sees exactly the same data."""
    g = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(batch_size, IN_DIM, generator=g)
    w = torch.linspace(-1.0, 1.0, IN_DIM)
    y = torch.sin(x @ w).unsqueeze(1)
    return x, y


def train_loop(config: dict[str, Any]) -> None:
    """``train_loop_per_worker`` for ``TorchTrainer``; resumable and preemptible."""
    torch.manual_seed(0)
    loop = StepLoop(config)
    model = make_model(int(config.get("hidden", 32)))
    opt = torch.optim.SGD(model.parameters(), lr=float(config.get("lr", 0.01)))
    # extra state: 4-byte floats, one per step slot; step s adds 1 at s % n, so a resumed
    # run sees its exact history or fails loudly
    extra = torch.zeros(int(float(config.get("state_mb", 0)) * 2**20) // 4)
    state = loop.restore()
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        if extra.numel():
            extra = state["extra"]
            counted = float(extra.sum())
            if counted != float(loop.step):
                raise RuntimeError(f"restored state counts {counted} steps, not {loop.step}")
    net: nn.Module = model
    if loop.world > 1 and dist.is_available() and dist.is_initialized():
        net = nn.parallel.DistributedDataParallel(model)
    batch = int(config.get("batch_size", 32))
    # step_sleep_s: the same for every worker count (weak scaling: each worker adds its
    # own batch); work_per_step_s: one step's work on one worker, split over the workers
    # (strong scaling: a fixed global batch), so that more GPUs finish the job sooner.
    share = float(config.get("work_per_step_s", 0.0)) / max(1, loop.world)
    pace = _Pace(config.get("pace_file"), float(config.get("step_sleep_s", 0.0)))
    loss_fn = nn.MSELoss()
    step_log = config.get("step_log") if loop.rank == 0 else None

    def state_fn() -> dict[str, Any]:
        out = {"model": model.state_dict(), "opt": opt.state_dict()}
        return {**out, "extra": extra} if extra.numel() else out

    for step in loop.steps(state_fn):
        if extra.numel():
            extra[step % extra.numel()] += 1
        x, y = synthetic_batch(step, loop.rank, batch)
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        pause = pace.now() + share
        if pause:
            time.sleep(pause)
        if step_log:
            with open(step_log, "a") as f:
                f.write(f"{loop.generation} {step}\n")
    log.info("rank %d stopped=%s at step %d", loop.rank, loop.stopped, loop.step)
