"""A Ray Train entrypoint for every catalogue job type: the model of :mod:`lyra_ray.jobs.models`.

``entrypoint: lyra_ray.jobs.catalogue_loop:train_loop`` with ``config: {job_type: resnet18}``
runs the job type the catalogue and the H200 table describe, preemptible and resizable
like any lyra job (``size``: ``auto``, the default, is ``real`` on a CUDA GPU and
``tiny`` on fake GPUs).
With several workers the gradients are averaged across them before each optimiser step
(what DDP does, written out because DDP needs the module before the optimiser exists).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from lyra_ray.train import StepLoop


def _device() -> str:
    if torch.cuda.is_available():
        import ray.train.torch

        return str(ray.train.torch.get_device())
    return "cpu"


def train_loop(config: dict[str, Any]) -> None:
    """``train_loop_per_worker``: steps the catalogue model named by ``job_type``."""
    from lyra_ray.jobs.models import build

    loop = StepLoop(config)
    distributed = loop.world > 1 and dist.is_available() and dist.is_initialized()

    def average(params: list[nn.Parameter]) -> None:
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= loop.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    model = build(
        str(config["job_type"]),
        str(config.get("size", "auto")),
        _device(),
        grad_hook=average if distributed else None,
    )
    state = loop.restore()
    if state is not None:
        model.module.load_state_dict(state["model"])
        model.optimizer.load_state_dict(state["opt"])
    for _ in loop.steps(
        lambda: {"model": model.module.state_dict(), "opt": model.optimizer.state_dict()}
    ):
        model.step()
