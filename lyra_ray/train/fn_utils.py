"""Ray Train's API inside a lyra worker: ``ray.train.get_context()``, ``report``,
``get_checkpoint`` and ``ray.train.torch.get_device`` answered by lyra.

WHY: a job's loop runs in lyra's warm workers (:mod:`lyra_ray.runtime.gang_worker`),
processes that outlive a run so that a resize does not start Python, import torch and
build a Ray Train worker group again. Users' loops are Ray Train loops and call Ray
Train's functions; Ray Train 2.60 routes every one of them through one object set per
process, its ``TrainFnUtils`` ("This class can be patched if new user APIs behaviors is
wanted", ``ray/train/v2/_internal/execution/train_fn_utils.py``), which is also how its
own local mode runs a loop without a controller. :class:`LyraTrainFnUtils` is that
object for a lyra run: the context (ranks, world size, the run's name), checkpoints
persisted where Ray Train would put them (``<storage>/<run name>/<dir name>``, so
:func:`lyra_ray.train.step_loop.latest_checkpoint` and a restarted scheduler find them
as before), the checkpoint reported last handed to the next generation's
``get_checkpoint()`` as Ray Train hands it to a rerun of the same name (recorded beside
the checkpoints, :func:`lyra_ray.train.storage.write_last_reported`), and collectives
over the run's own process group.

``is_distributed()`` is False on purpose: Ray Train's ``get_device`` then asks torch
for the current CUDA device, which the worker has set to its own GPU
(``CUDA_VISIBLE_DEVICES``), instead of Ray's GPU ids of the process: a warm worker
holds no GPU of its own in Ray's eyes; its run's GPU slot does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.train import Checkpoint
from ray.train.v2._internal.execution.train_fn_utils import TrainFnUtils, set_train_fn_utils
from ray.train.v2.api.context import LocalTrainContext

from lyra_ray.train.storage import filesystem, join, persist_dir, write_last_reported

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """Where this worker sits in its run: what Ray Train's context reports."""

    experiment_name: str
    storage_path: str
    world_rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int


class LyraTrainFnUtils(TrainFnUtils):
    """One run's Ray Train API in one worker (set per run by :func:`install`)."""

    def __init__(self, run: RunContext, checkpoint: Checkpoint | None = None) -> None:
        self.run = run
        self._context = LocalTrainContext(
            experiment_name=run.experiment_name,
            world_size=run.world_size,
            world_rank=run.world_rank,
            local_rank=run.local_rank,
            local_world_size=run.local_world_size,
            node_rank=run.node_rank,
        )
        self.checkpoint = checkpoint
        self.persisted: str | None = None
        """Where the last checkpoint went, named as the storage is (a path or a URI)."""
        self.metrics: dict[str, Any] = {}
        self.reported: list[tuple[Checkpoint, dict[str, Any]]] = []
        self.reports = 0

    def report(
        self,
        metrics: dict[str, Any],
        checkpoint: Checkpoint | None = None,
        checkpoint_dir_name: str | None = None,
        checkpoint_upload_mode: Any = None,
        delete_local_checkpoint_after_upload: bool | None = None,
        checkpoint_upload_fn: Callable[[Checkpoint, str], Checkpoint] | None = None,
        validation: Any = False,
    ) -> None:
        """Persist ``checkpoint`` (if any) under the run's directory and keep the metrics.

        Synchronous whatever the upload mode: the loop's stop path relies on the
        checkpoint being durable when ``report`` returns (it is in Ray Train too, in
        its default mode)."""
        if validation:
            raise ValueError(
                "ray.train.report(validation=...) needs a ValidationConfig; lyra runs take none"
            )
        self.reports += 1
        self.metrics = dict(metrics)
        if checkpoint is None:
            return
        name = checkpoint_dir_name or f"checkpoint_{self.reports:06d}"
        if checkpoint_upload_fn is not None:
            persisted = checkpoint_upload_fn(checkpoint, name)
            self.persisted = None  # the user's upload: only a rescan knows where
        else:
            run_dir = join(self.run.storage_path, self.run.experiment_name)
            dest = join(run_dir, name)
            with checkpoint.as_directory() as local:
                persist_dir(local, dest)
            # the next generation's get_checkpoint() is this one, as under Ray Train
            write_last_reported(run_dir, dest, self.run.world_rank)
            fs, inner = filesystem(dest)
            persisted = Checkpoint(inner, filesystem=fs)
            self.persisted = dest
        self.checkpoint = persisted
        self.reported.append((persisted, dict(metrics)))

    def get_checkpoint(self) -> Checkpoint | None:
        return self.checkpoint

    def get_all_reported_checkpoints(
        self, consistency_mode: Any = None, timeout_s: Any = None
    ) -> list[Any]:
        from ray.train.v2.api.reported_checkpoint import (
            ReportedCheckpoint,
            ReportedCheckpointStatus,
        )

        done = ReportedCheckpointStatus.COMMITTED
        return [ReportedCheckpoint(checkpoint=c, metrics=m, status=done) for c, m in self.reported]

    def get_dataset_shard(self, dataset_info: Any) -> Any:
        raise RuntimeError("lyra runs take no Ray Data datasets: read your data in the loop")

    def get_context(self) -> LocalTrainContext:
        return self._context

    def get_preemption_info(self) -> None:
        return None  # lyra asks a run to stop through StepLoop, not Ray Train's watcher

    def is_distributed(self) -> bool:
        return False

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.run.world_size > 1 and dist.is_initialized():
            dist.barrier()

    def broadcast_from_rank_zero(self, data: Any) -> Any:
        import torch.distributed as dist

        if self.run.world_size > 1 and dist.is_initialized():
            box = [data]
            dist.broadcast_object_list(box, src=0)
            return box[0]
        return data


def install(utils: LyraTrainFnUtils) -> None:
    """Make ``utils`` answer this process's Ray Train calls (one run at a time)."""
    set_train_fn_utils(utils)
