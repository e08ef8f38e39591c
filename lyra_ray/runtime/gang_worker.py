"""A warm worker: one process of a job's gang that runs the job's loop, run after run.

WHY a process that outlives its run: on this project's 2-core host a Ray Train worker
group took 16.75 s to come up for a resize (``benchmarks/results/resize_phases.json``
before #47), most of it starting Python processes and importing torch and Ray Train in
each (``import ray.train.torch`` alone: ~2.6 s of CPU per process). A warm worker pays
that once, when it is created; a resize then only re-forms the process group among the
workers that stay or join (:mod:`lyra_ray.runtime.gang`).

What it holds, and what it does not: the job's code imported (in the job's runtime
env, which the gang's workers inherit), torch, and between runs its torch process
group. It holds no GPU of its own in Ray's eyes (``num_gpus=0``): its run's GPU is
reserved by a slot (:mod:`lyra_ray.runtime.gpu_slots`) and, on a node with NVIDIA GPUs,
handed to the process as ``CUDA_VISIBLE_DEVICES`` before CUDA is first touched. A
process that has touched CUDA is bound to those GPUs for life: the gang never moves it
to others (:func:`lyra_ray.runtime.gang_plan.plan`).

The loop is called exactly as a Ray Train worker calls it
(:func:`lyra_ray.train.signature.call_loop`), with Ray Train's API answered by lyra
(:mod:`lyra_ray.train.fn_utils`). A failure is returned, not raised, with whether it
came from the job's code (a rerun would fail again) or from the run's set-up.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

import ray

from lyra_ray.runtime.actor_log import actor_logging

log = logging.getLogger(__name__)

NVIDIA_PROC = "/proc/driver/nvidia/gpus"
"""Where an NVIDIA driver lists its GPUs: a node without it has no CUDA device to bind
(the fake-GPU nodes of every local cluster here)."""


def has_nvidia_gpus(proc: str = NVIDIA_PROC) -> bool:
    """Whether this node's NVIDIA driver lists a GPU, read without touching CUDA (which
    would fix the process's visible devices before its run's are known)."""
    try:
        return bool(os.listdir(proc))
    except OSError:
        return False


def take_gpus(bound: tuple[str, ...] | None, ids: list[str], cuda_touched: bool) -> tuple[str, ...]:
    """The GPU ids a worker binds to for a run: ``ids``, if it is not bound yet and has
    not touched CUDA (which would have fixed its visible devices already), or if they
    are the ones it is bound to. Raises otherwise: running it would use other GPUs than
    its slot's."""
    want = tuple(str(g) for g in ids)
    if bound is None and cuda_touched:
        raise RuntimeError("CUDA was touched before the worker's GPUs were known")
    if bound is not None and bound != want:
        raise RuntimeError(f"worker bound to GPUs {bound}, asked for {want}")
    return want


def first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else ""


@ray.remote(num_cpus=0, max_restarts=0, max_concurrency=4)  # type: ignore[call-overload]
class GangWorker:
    """One warm process of a job's gang (created by :class:`lyra_ray.runtime.gang.Gang`)."""

    def __init__(self, job_id: str, entrypoint: str) -> None:
        t0 = time.time()
        actor_logging()
        import torch
        import torch.distributed  # noqa: F401

        from lyra_ray.train import fn_utils  # noqa: F401
        from lyra_ray.train.user_code import load_entrypoint

        self.job_id = job_id
        self.entrypoint = entrypoint
        self.bound: tuple[str, ...] | None = None
        """The GPU ids this process was bound to (``CUDA_VISIBLE_DEVICES``), if any."""
        self.gpus = has_nvidia_gpus()
        self.lock = threading.Lock()
        """Serialises a run's set-up with :meth:`leave` (a threaded actor: the gang's
        unwaited ``leave`` of the last run may come after the next run's ``run``)."""
        self.active = False
        self.fn: Any = None
        if not self.gpus:  # the job's code imports here, once; on a GPU node, only once
            self.fn = load_entrypoint(entrypoint)  # bound: its import may touch CUDA
        self.runs = 0
        self.started_s = time.time() - t0

    def info(self) -> dict[str, Any]:
        rc = ray.get_runtime_context()
        return {
            "node_id": rc.get_node_id(),
            "ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            "pid": os.getpid(),
            "started_s": self.started_s,
            "runs": self.runs,
            "bound": list(self.bound) if self.bound is not None else None,
            "cuda_touched": self._cuda_touched(),
            "gpus": self.gpus,
        }

    def _cuda_touched(self) -> bool:
        import torch

        return bool(self.gpus and torch.cuda.is_initialized())  # type: ignore[no-untyped-call]

    def bind(self, gpu_ids: list[str] | None) -> bool:
        """Take the run's GPUs (on a node with NVIDIA GPUs); returns whether torch sees
        CUDA here (what ``backend: auto`` decides by)."""
        import torch

        if not self.gpus:
            return False  # fake GPUs: Ray's ids name no device; torch has none to see
        if gpu_ids is not None:
            touched = bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
            ids = take_gpus(self.bound, gpu_ids, touched)
            if self.bound is None:
                os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
                self.bound = ids
        return bool(torch.cuda.is_available())

    def endpoint(self) -> tuple[str, int]:
        """An address and a free port here for the run's rendezvous (rank 0 only)."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = int(s.getsockname()[1])
        return ray.util.get_node_ip_address(), port  # type: ignore[no-untyped-call]

    def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Form the run's process group, call the loop, return how it ended.

        ``spec``: rank, world, local_rank, local_world, node_rank, master (ip, port),
        backend, config, run_name, storage_path, resume (a checkpoint path or None),
        timeout_s. Blocks until the loop returns (this actor's other methods stay
        callable: it is threaded)."""
        from lyra_ray.train import fn_utils
        from lyra_ray.train.signature import call_loop
        from lyra_ray.train.user_code import load_entrypoint

        self.runs += 1
        try:
            if self.fn is None:
                self.fn = load_entrypoint(self.entrypoint)
        except BaseException as e:  # the job's own code does not import
            log.exception("the job's entrypoint did not import")
            return {"ok": False, "user": True, "error": f"{type(e).__name__}: {first_line(e)}"}
        with self.lock:
            self.active = True
            try:
                utils = self._setup(spec)
            except BaseException as e:  # set-up, not the job's code: a rerun may well work
                log.exception("run set-up failed")
                self.active = False
                return {"ok": False, "user": False, "error": f"{type(e).__name__}: {first_line(e)}"}
            fn_utils.install(utils)
        try:
            value = call_loop(self.fn, dict(spec["config"]))
            del value  # Ray Train hands a loop's return value back; lyra's runs have none
        except BaseException as e:
            log.exception("the job's loop raised")
            return {
                "ok": False,
                "user": True,
                "error": f"{type(e).__name__}: {first_line(e)}",
                "traceback": traceback.format_exc()[-4000:],
            }
        finally:
            self.active = False
        return {
            "ok": True,
            "metrics": utils.metrics,
            "checkpoint": utils.persisted,
            "cuda_touched": self._cuda_touched(),
        }

    def _setup(self, spec: dict[str, Any]) -> Any:
        import torch
        import torch.distributed as dist
        from ray.train import Checkpoint

        from lyra_ray.train import fn_utils

        if dist.is_initialized():
            dist.destroy_process_group()
        ip, port = spec["master"]
        env = {
            "RANK": spec["rank"],
            "LOCAL_RANK": spec["local_rank"],
            "WORLD_SIZE": spec["world"],
            "LOCAL_WORLD_SIZE": spec["local_world"],
            "NODE_RANK": spec["node_rank"],
            "MASTER_ADDR": ip,
            "MASTER_PORT": port,
        }
        os.environ.update({k: str(v) for k, v in env.items()})
        if spec["backend"] == "nccl":
            torch.cuda.set_device(0)  # its own GPU: CUDA_VISIBLE_DEVICES holds only its ids
        dist.init_process_group(
            spec["backend"],
            init_method=f"tcp://{ip}:{port}",
            rank=spec["rank"],
            world_size=spec["world"],
            timeout=timedelta(seconds=float(spec.get("timeout_s", 300.0))),
        )
        resume = spec.get("resume")
        run = fn_utils.RunContext(
            experiment_name=spec["run_name"],
            storage_path=spec["storage_path"],
            world_rank=spec["rank"],
            world_size=spec["world"],
            local_rank=spec["local_rank"],
            local_world_size=spec["local_world"],
            node_rank=spec["node_rank"],
        )
        return fn_utils.LyraTrainFnUtils(run, Checkpoint(resume) if resume else None)

    def leave(self) -> dict[str, Any]:
        """The run is over for this process: drop its process group and what the loop
        left behind; returns whether CUDA was touched (then it can only serve the same
        GPUs again)."""
        import torch.distributed as dist
        from ray.train.v2._internal.execution.train_fn_utils import set_train_fn_utils

        with self.lock:
            if self.active:  # a newer run already set itself up: nothing of the old left
                return {"cuda_touched": self._cuda_touched(), "bound": self.bound}
            if dist.is_initialized():
                dist.destroy_process_group()
            set_train_fn_utils(None)  # its last checkpoint and metrics go with it
        gc.collect()
        return {"cuda_touched": self._cuda_touched(), "bound": self.bound}

    def ping(self) -> int:
        return os.getpid()
