"""The process-group backend follows the device: NCCL on CUDA workers, gloo elsewhere.

WHY decide on the workers: a lyra run asks Ray Train for GPUs (``use_gpu=True``), and
Ray Train's own default then picks NCCL, which fails on a node whose "GPUs" are Ray
resources without CUDA (the fake-GPU nodes of every local cluster and test here). The
scheduler cannot tell a real GPU from a declared one; a worker can, by asking
``torch.cuda.is_available()`` where it runs. :class:`LyraTorchConfig` with ``backend=
"auto"`` asks every worker of the group once it is up (no extra process) and picks
``nccl`` only if all of them have CUDA, else ``gloo``; ``gloo`` and ``nccl`` are taken as
given. Ray Train 2.60 has no public hook for this choice, so it subclasses its
``TorchConfig`` and extends the torch backend's ``on_start`` (``_TorchBackend``, the
class ``TorchConfig.backend_cls`` returns), keeping everything else Ray's. The rule itself
is :mod:`lyra_ray.train.backend_rule`'s, shared with the gang executor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ray.train.torch import TorchConfig
from ray.train.torch.config import _TorchBackend

from lyra_ray.train.backend_rule import cuda_available, resolve_backend


class _LyraTorchBackend(_TorchBackend):
    def on_start(self, worker_group: Any, backend_config: Any) -> None:
        if getattr(backend_config, "backend", None) in (None, "auto"):
            cuda = [bool(x) for x in worker_group.execute(cuda_available)]
            chosen = resolve_backend(backend_config.backend, cuda)
            backend_config = dataclasses.replace(backend_config, backend=chosen)
        super().on_start(worker_group, backend_config)


@dataclass
class LyraTorchConfig(TorchConfig):
    """``TorchConfig`` whose ``backend`` may be ``"auto"`` (the default here)."""

    backend: str | None = "auto"

    @property
    def backend_cls(self) -> type[_TorchBackend]:
        return _LyraTorchBackend
