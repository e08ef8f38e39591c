"""Which process-group backend a run takes: NCCL where every worker has CUDA, else gloo.

WHY its own module, without Ray Train: the gang coordinator (:mod:`lyra_ray.runtime.gang`)
applies the same rule as the Ray Train path (:mod:`lyra_ray.train.backend`), and it is a
process of its own per job; importing ``ray.train.torch`` there (torch, pandas, Ray
Train: about 2 s of CPU) only to call this function delayed every job's start.
"""

from __future__ import annotations


def cuda_available() -> bool:
    """Run on a worker: whether torch sees a CUDA device there."""
    import torch

    return bool(torch.cuda.is_available())


def resolve_backend(requested: str | None, cuda: list[bool]) -> str:
    """The backend for ``requested`` given each worker's ``cuda_available()``."""
    if requested not in (None, "auto"):
        return str(requested)
    return "nccl" if cuda and all(cuda) else "gloo"
