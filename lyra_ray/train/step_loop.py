"""A step loop helper that any Ray Train loop can call to be schedulable by lyra.

The scheduler preempts and resizes jobs by *asking* them to stop: between two steps
the loop checks a stop flag, writes a checkpoint holding its step count and returns.
A rerun (maybe with another worker count) restores the newest checkpoint and carries
on from that exact step, so no step is lost and none is repeated. The helper also
reports steps done and steps/s, which is how the scheduler learns throughputs online.

Usage inside ``train_loop_per_worker(config)``::

    loop = StepLoop(config)
    state = loop.restore()                      # None on a fresh start
    if state: model.load_state_dict(state["model"])
    for step in loop.steps(lambda: {"model": model.state_dict()}):
        ...one training step...

Outside a lyra run (no ``lyra_job_id`` in the config) the same loop simply runs all
steps, so a user can test the entrypoint with a plain ``TorchTrainer``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ray
import ray.train
import torch
import torch.distributed as dist

from lyra_ray.contract.labels import GPU_TYPE_LABEL
from lyra_ray.contract.names import CONTROL_ACTOR, NAMESPACE
from lyra_ray.contract.names import RESUME_KEY as RESUME_KEY  # re-exported: its old home
from lyra_ray.contract.profiling import PROFILE_KEY
from lyra_ray.contract.profiling import active as active_measurement
from lyra_ray.model.mixed import BATCH_SHARES_KEY, worker_share
from lyra_ray.train.storage import STATE_FILE, newest_checkpoint, read_step

log = logging.getLogger(__name__)

MODEL_FILE = "state.pt"


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """Step count stored in a checkpoint directory (a path or a URI), or None if it is
    not ours."""
    return read_step(path)


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> tuple[str, int] | None:
    """The checkpoint with the most steps under a run directory: a local path, a shared
    mount or an object-store URI (:mod:`lyra_ray.train.storage`).

    Why scan instead of trusting Ray Train's own bookkeeping: the scheduler must find
    the checkpoint after *it* restarted, when no Result object of the old run exists.
    """
    return newest_checkpoint(run_dir)


class StepLoop:
    """Counts steps, checkpoints them, reports progress and honours stop requests."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.profile: Mapping[str, Any] | None = config.get(PROFILE_KEY)
        """Profile mode (``lyra profile`` measures this loop): no checkpoint, no control
        plane; the loop runs until the measurement (:mod:`lyra_ray.profiling.meter`)
        has converged."""
        self.total_steps = int(config["total_steps"]) if not self.profile else 2**62
        self.checkpoint_every = max(1, int(config.get("checkpoint_every", 20)))
        self.job_id: str | None = None if self.profile else config.get("lyra_job_id")
        self.generation = int(config.get("lyra_generation", 0))
        self.step = 0
        self.stopped = False
        self._saved_step = -1
        if self.profile and not self.profile.get("in_train"):
            self.rank, self.world = 0, 1  # one process of the profiler's, outside Train
        else:
            ctx = ray.train.get_context()
            self.rank = ctx.get_world_rank()
            self.world = ctx.get_world_size()
        self._measure = active_measurement() if self.profile and self.rank == 0 else None
        self._control = self._find_control() if self.job_id and self.rank == 0 else None
        self._last_poll = 0.0
        self._last_report = 0.0
        self._window: tuple[float, int] = (time.monotonic(), 0)
        self.metrics: dict[str, Any] = {}
        """The user's latest metrics (:meth:`report`), sent with the next checkpoint."""
        self._announce()

    # ------------------------------------------------------------------ control plane

    def _find_control(self) -> Any:
        try:
            return ray.get_actor(CONTROL_ACTOR, namespace=NAMESPACE)
        except ValueError:
            log.warning("no %s actor: running without scheduler control", CONTROL_ACTOR)
            return None

    def _announce(self) -> None:
        """Tell the scheduler where this worker really runs (its node's own labels)."""
        if not self.job_id:
            return
        control = self._control or self._find_control()
        if control is None:
            return
        rc = ray.get_runtime_context()
        control.worker.remote(
            self.job_id, self.generation, self.rank, rc.get_node_id(), rc.get_node_labels()
        )

    def _stop_requested(self) -> bool:
        """Rank 0 asks the control actor (at most every 0.2 s); all ranks agree via gloo."""
        flag = 0
        if self._measure is not None:
            flag = int(self._measure(self.step))
        if self._control is not None and time.monotonic() - self._last_poll > 0.2:
            self._last_poll = time.monotonic()
            try:
                flag = int(ray.get(self._control.should_stop.remote(self.job_id, self.generation)))
            except Exception:  # control restarting: keep training, ask again later
                log.debug("stop poll failed", exc_info=True)
        if self.world > 1 and dist.is_available() and dist.is_initialized():
            t = torch.tensor([flag], dtype=torch.int32, device=self._flag_device())
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = int(t.item())
        return bool(flag)

    @staticmethod
    def _flag_device() -> torch.device:
        """Where the stop flag's all-reduce runs: NCCL reduces only CUDA tensors, gloo
        CPU ones (a run on CUDA workers gets NCCL: :mod:`lyra_ray.train.backend`)."""
        if dist.get_backend() == "nccl":
            import ray.train.torch

            return ray.train.torch.get_device()
        return torch.device("cpu")

    def _report_progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._control is None or (not force and now - self._last_report < 0.5):
            return
        t0, s0 = self._window
        sps = (self.step - s0) / (now - t0) if now > t0 and self.step > s0 else None
        self._window = (now, self.step)
        self._last_report = now
        self._control.progress.remote(self.job_id, self.generation, self.step, sps)

    @property
    def batch_share(self) -> float:
        """This worker's share of the job's global batch: ``1 / world``, except on a
        mixed-type run (Lyra's flexible workers on a lent server of another GPU type),
        where each worker's share follows its GPU's speed so that all finish a step
        together. A loop that keeps a global batch takes
        ``round(global_batch * loop.batch_share)`` samples per step on this worker."""
        shares = self.config.get(BATCH_SHARES_KEY)
        label: Any = None
        if shares:  # annotated as lists of values; a label is one string in Ray 2.60
            label = ray.get_runtime_context().get_node_labels().get(GPU_TYPE_LABEL)
            label = label[0] if isinstance(label, list) and label else label
        return worker_share(shares, label if isinstance(label, str) else None, self.world)

    def report(self, **metrics: Any) -> None:
        """Record the loop's own metrics (loss, accuracy...): they go to Ray Train with
        the next checkpoint (Ray Train's ``report`` is collective and tied to the
        checkpoints here, so it is not called once per step)."""
        self.metrics.update(metrics)

    # ------------------------------------------------------------------ checkpoints

    def restore(self) -> dict[str, Any] | None:
        """Load the newest checkpoint (Ray Train's or the runtime's hint); None if none."""
        if self.profile:
            return None
        candidates: list[ray.train.Checkpoint] = []
        ckpt = ray.train.get_checkpoint()
        if ckpt is not None:
            candidates.append(ckpt)
        hint = self.config.get(RESUME_KEY)
        if hint:  # a path or a URI: Checkpoint resolves either through pyarrow.fs
            candidates.append(ray.train.Checkpoint(str(hint)))
        best: tuple[ray.train.Checkpoint, int] | None = None
        for c in candidates:
            step = read_step(c.path, c.filesystem)
            if step is not None and (best is None or step > best[1]):
                best = (c, step)
        if best is None:
            return None
        self.step = best[1]
        self._saved_step = self.step
        self._window = (time.monotonic(), self.step)
        with best[0].as_directory() as local:  # fetched when it is not on this node
            state: dict[str, Any] = torch.load(
                Path(local) / MODEL_FILE, map_location="cpu", weights_only=False
            )
        log.info("restored %s at step %d", best[0].path, self.step)
        return state

    def save(self, state: Mapping[str, Any]) -> None:
        """All ranks call this (Ray Train's report is collective); rank 0 writes."""
        if self.step == self._saved_step or self.profile:
            return
        self._saved_step = self.step
        metrics = {**self.metrics, "step": self.step, "lyra_generation": self.generation}
        if self.rank != 0:
            ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            torch.save(dict(state), Path(tmp) / MODEL_FILE)
            (Path(tmp) / STATE_FILE).write_text(
                json.dumps({"step": self.step, "job_id": self.job_id})
            )
            ray.train.report(
                metrics,
                checkpoint=ray.train.Checkpoint.from_directory(tmp),
                checkpoint_dir_name=f"step_{self.step:09d}",
            )

    # ------------------------------------------------------------------ the loop

    def steps(self, state_fn: Callable[[], Mapping[str, Any]]) -> Iterator[int]:
        """Yield step indices until done or asked to stop; checkpoint on the way out."""
        while self.step < self.total_steps:
            if self._stop_requested():
                self.stopped = True
                break
            yield self.step
            self.step += 1
            self._report_progress()
            if self.step % self.checkpoint_every == 0 and self.step < self.total_steps:
                self.save(state_fn())
        self.save(state_fn())
        self._report_progress(force=True)
