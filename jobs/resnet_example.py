"""A real model through lyra's public training API: a small ResNet on synthetic images.

The same file runs unchanged on CPU workers (gloo) and on CUDA workers (NCCL): the
device follows ``torch.cuda.is_available()`` on each worker, and lyra picks the
process-group backend the same way (``backend: auto``, :mod:`lyra_ray.train.backend`).
It is preemptible and resizable through :class:`lyra_ray.train.StepLoop`: a preempted or
resized run resumes at the step it stopped at, with the model, the optimizer and the
data stream where they were (each step's batch is a function of the step and the rank,
so a rerun sees the same data), losing at most one checkpoint interval if it is killed
instead of stopped.

Name it in a job as ``entrypoint: lyra_ray.jobs.resnet_example:train_loop`` (or copy the file
into your own directory and submit with ``--working-dir``: docs/training.md). Config
keys: ``total_steps`` (set by lyra), ``checkpoint_every`` (20), ``batch_size`` (16 per
worker), ``width`` (16 channels), ``blocks`` (2 per stage), ``image`` (32 px),
``classes`` (10), ``lr`` (0.05), ``step_sleep_s`` (0: extra seconds per step standing
in for a bigger model), ``step_log`` (a file rank 0 appends "generation step" lines to;
tests use it to prove no step was lost or repeated).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from lyra_ray.train import StepLoop

log = logging.getLogger(__name__)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut (He et al., 2016)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class ResNet(nn.Module):
    """A CIFAR-style ResNet: three stages of ``blocks`` blocks, widths w, 2w, 4w."""

    def __init__(self, width: int = 16, blocks: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        layers: list[nn.Module] = []
        cin = width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks):
                layers.append(BasicBlock(cin, cout, 2 if i > 0 and b == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def synthetic_batch(
    step: int, rank: int, batch: int, image: int, classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy copies of one fixed pattern per class (a learnable task), fixed per
    (step, rank) so that a rerun sees exactly the same data."""
    protos = torch.randn(classes, 3, image, image, generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(step * 7919 + rank)
    y = torch.randint(0, classes, (batch,), generator=g)
    return protos[y] + torch.randn(batch, 3, image, image, generator=g), y


def device() -> torch.device:
    """This worker's device: its CUDA GPU when it has one, else the CPU."""
    if torch.cuda.is_available():
        import ray.train.torch

        return ray.train.torch.get_device()
    return torch.device("cpu")


def train_loop(config: dict[str, Any]) -> None:
    """``train_loop_per_worker`` for ``TorchTrainer``; resumable and preemptible."""
    torch.manual_seed(0)
    loop = StepLoop(config)
    dev = device()
    classes = int(config.get("classes", 10))
    model = ResNet(int(config.get("width", 16)), int(config.get("blocks", 2)), classes).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=float(config.get("lr", 0.05)), momentum=0.9)
    state = loop.restore()
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
    net: nn.Module = model
    if loop.world > 1 and dist.is_available() and dist.is_initialized():
        ids = [dev.index] if dev.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    # the global batch is kept: an even split, or by speed on a mixed-type run
    per_worker = int(config.get("batch_size", 16))
    batch = max(1, round(per_worker * loop.world * loop.batch_share))
    image = int(config.get("image", 32))
    pause = float(config.get("step_sleep_s", 0.0))
    step_log = config.get("step_log") if loop.rank == 0 else None
    for step in loop.steps(lambda: {"model": model.state_dict(), "opt": opt.state_dict()}):
        x, y = synthetic_batch(step, loop.rank, batch, image, classes)
        opt.zero_grad()
        loss = F.cross_entropy(net(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        loop.report(loss=float(loss.detach()))
        if pause:
            time.sleep(pause)
        if step_log:
            with open(step_log, "a") as f:
                f.write(f"{loop.generation} {step}\n")
    log.info("rank %d stopped=%s at step %d", loop.rank, loop.stopped, loop.step)
