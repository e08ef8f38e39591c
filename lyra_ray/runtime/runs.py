"""Ray Train runs: launch, stop cooperatively, kill after a grace period, resume.

Each run of a job lives in its own *detached* actor (``lyra-run-<job>-g<n>``) that calls
``TorchTrainer.fit()``. Detached because a non-detached owner takes its children down
with it: if the scheduler actor started the fit() task itself, killing the scheduler
would kill every training job. Killing the run actor is the hard stop — Ray tears down
the Train controller and its workers it owns, and (with the dashboard on) frees the
GPUs in about a second.

The run name and storage path are stable per job, so a rerun writes its checkpoints
next to the old ones and :func:`lyra_ray.train.step_loop.latest_checkpoint` finds the newest.

The run actor is created with the job's own runtime env (its user's directory, modules,
packages, variables: :mod:`lyra_ray.runtime.user_env`). Ray hands a parent's runtime env
down to the tasks and actors it starts, so the Train controller and every Train worker of
every generation run in it too (checked on Ray 2.60: an actor created with only
``env_vars``, as Train creates its controller and workers, keeps its parent's
``working_dir``, and the ``env_vars`` merge).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from lyra_ray.contract.labels import GPU_TYPE_LABEL, NODE_ID_LABEL
from lyra_ray.contract.names import NAMESPACE, run_actor_name
from lyra_ray.runtime.control import get_or_create_control
from lyra_ray.train.step_loop import RESUME_KEY, latest_checkpoint
from lyra_ray.train.user_code import load_entrypoint, user_loop

log = logging.getLogger(__name__)


def run_name(job_id: str) -> str:
    """The stable Ray Train ``RunConfig.name`` of a job (same across reruns)."""
    return f"lyra-{job_id}"


@dataclass(frozen=True)
class RunRequest:
    """Everything a run actor needs: plain data, so it pickles across processes."""

    job_id: str
    generation: int
    entrypoint: str
    total_steps: int
    config: Mapping[str, Any]
    workers: int
    label_selectors: tuple[Mapping[str, str], ...]
    storage_path: str
    runtime_env: Mapping[str, Any] | None = None
    """The job's uploaded runtime env (URIs only), or None for the cluster's own."""
    backend: str = "auto"
    """``auto`` (NCCL on CUDA workers, else gloo), ``gloo`` or ``nccl``."""
    gpu_per_worker: float = 1.0
    """1, or 0.5 for each job of a space-sharing pair (Gavel's packed policies): both
    runs' workers then hold half of the same GPUs, pinned to the same nodes."""


def worker_selectors(
    gpu_label: str,
    nodes: Sequence[tuple[str, int]],
    workers: int,
    node_labels: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], ...]:
    """One label selector per worker: its node (when placed) and always its GPU type.

    ``node_labels`` gives each node's own GPU-type label. A job whose flexible workers sit
    on servers of another type (``Assignment.extra``, Lyra) spans nodes of two types, so
    each worker must carry its own node's label; without the map every placed worker
    carries ``gpu_label`` (the base's type), which a node of another type never matches.
    """
    out: list[dict[str, str]] = []
    for node_id, gpus in nodes:
        label = node_labels.get(node_id, gpu_label) if node_labels else gpu_label
        out += [{GPU_TYPE_LABEL: label, NODE_ID_LABEL: node_id}] * gpus
    while len(out) < workers:
        out.append({GPU_TYPE_LABEL: gpu_label})
    return tuple(out[:workers])


@ray.remote(num_cpus=0, max_restarts=0)
class TrainRun:
    """Hosts one ``fit()``, started by its own constructor; reports the outcome to the
    control actor and idles until the runtime kills it.

    The work starts in ``__init__`` (on a thread, so the constructor returns at once)
    rather than in a method the scheduler calls after creating the actor: a method call
    is queued in the *caller's* process until the actor is up, so a scheduler killed in
    those seconds took the call with it and left a live actor that never trained, which
    no check saw as lost (found by ``tests/chaos``). A detached actor's creation, with
    its arguments, belongs to the cluster and survives its creator.
    """

    def __init__(self, req: RunRequest) -> None:
        self.outcome: str | None = None
        threading.Thread(target=self.run, args=(req,), name="lyra-fit", daemon=True).start()

    def run(self, req: RunRequest) -> str:
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer

        from lyra_ray.train.backend import LyraTorchConfig

        control = get_or_create_control()
        steps = 0.0
        try:
            load_entrypoint(req.entrypoint)  # fails here, once, rather than on every worker
            resume = latest_checkpoint(os.path.join(req.storage_path, run_name(req.job_id)))
            config = dict(req.config)
            config.update(
                total_steps=req.total_steps,
                lyra_job_id=req.job_id,
                lyra_generation=req.generation,
            )
            if resume is not None:
                config[RESUME_KEY] = resume[0]
                steps = float(resume[1])
            selectors = [dict(s) for s in req.label_selectors]
            trainer = TorchTrainer(
                functools.partial(user_loop, entrypoint=req.entrypoint),
                train_loop_config=config,
                torch_config=LyraTorchConfig(backend=req.backend),
                scaling_config=ScalingConfig(  # type: ignore[call-arg]
                    num_workers=req.workers,
                    use_gpu=True,
                    resources_per_worker={"GPU": req.gpu_per_worker},
                    label_selector=selectors,
                ),
                run_config=RunConfig(
                    name=run_name(req.job_id),
                    storage_path=req.storage_path,
                    failure_config=FailureConfig(max_failures=0),
                ),
            )
            result = trainer.fit()
            steps = float((result.metrics or {}).get("step", steps))
            outcome = "completed" if steps >= req.total_steps else "stopped"
            message = ""
        except Exception as e:  # the user's loop failed, a worker died, or a stop tore it down
            log.exception("run %s/%d failed", req.job_id, req.generation)
            stopping = ray.get(control.should_stop.remote(req.job_id, req.generation))
            outcome, message = ("stopped", "") if stopping else failure(e)
            found = latest_checkpoint(os.path.join(req.storage_path, run_name(req.job_id)))
            steps = float(found[1]) if found else 0.0
        ray.get(control.finish.remote(req.job_id, req.generation, outcome, steps, message))
        self.outcome = outcome
        return outcome


def failure(e: BaseException) -> tuple[str, str]:
    """(outcome, one-line reason) of a ``fit()`` that raised.

    ``failed``: the user's own code raised on every failing worker — a rerun would
    raise again, so the job fails at once. ``crashed``: anything else — a Train worker
    process died, a health check or the controller failed — which a rerun from the
    last checkpoint may well survive; the runtime restarts it up to its retry limit.
    Ray 2.60's ``WorkerGroupError.worker_failures`` holds, per rank, the user's own
    exception (unwrapped) or one of Ray's (a Train or core error) for anything else.
    """
    from ray.train.v2._internal.exceptions import RayTrainError, UserExceptionWithTraceback

    failures = getattr(e, "worker_failures", None)
    if isinstance(failures, dict) and failures:
        errors = {
            rank: x._base_exc if isinstance(x, UserExceptionWithTraceback) else x
            for rank, x in failures.items()
        }
        if not any(isinstance(x, RayTrainError | ray.exceptions.RayError) for x in errors.values()):
            rank, first = min(errors.items())
            what = f"{type(first).__name__}: {_first_line(first)}"
            return "failed", f"the job's code raised on worker rank {rank}: {what}"[:500]
        parts = [_crash_line(rank, x) for rank, x in sorted(errors.items())]
        return "crashed", "; ".join(parts)[:500]
    return "crashed", f"the run failed: {type(e).__name__}: {_first_line(e)}"[:500]


def _crash_line(rank: int, e: BaseException) -> str:
    text = str(e)
    if "worker process has died" in text or "actor died" in text:
        pid = re.search(r"\bpid[=:]\s*(\d+)", text)
        kind = re.search(r"Worker exit type: (\w+)", text)
        return (
            f"Train worker process died (rank {rank}"
            + (f", pid {pid.group(1)}" if pid else "")
            + (f", exit type {kind.group(1)}" if kind else "")
            + ")"
        )
    return f"Train worker rank {rank} failed: {type(e).__name__}: {_first_line(e)}"


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def start_run(req: RunRequest) -> None:
    """Start (or resume) a run of ``req.generation`` (older generations see should_stop).

    A run whose runtime env names a package the cluster's GCS no longer holds (a
    ``lyra down`` / ``lyra up`` in between: packages live in the GCS, checkpoints on
    disk) is not started: its run ends at once as failed, naming the package, rather
    than an actor that cannot start and vanishes without a word."""
    from lyra_ray.runtime.job_env import missing_packages

    control = get_or_create_control()
    ray.get(control.begin.remote(req.job_id, req.generation))
    missing = missing_packages(req.runtime_env)
    if missing:
        why = (
            f"the job's runtime env package {missing[0]} is gone from this Ray cluster "
            "(packages live in the cluster's GCS, which a new cluster does not have): "
            "submit the job again from its directory"
        )
        ray.get(control.finish.remote(req.job_id, req.generation, "failed", 0.0, why))
        return
    actor = TrainRun.options(  # type: ignore[attr-defined]
        name=run_actor_name(req.job_id, req.generation),
        namespace=NAMESPACE,
        lifetime="detached",
        resources={"node:__internal_head__": 0.001},
        runtime_env=dict(req.runtime_env) if req.runtime_env else None,
    ).remote(req)
    del actor  # detached: it runs on without a handle
    log.info("launched %s gen %d with %d workers", req.job_id, req.generation, req.workers)


def run_alive(job_id: str, generation: int) -> bool:
    try:
        ray.get_actor(run_actor_name(job_id, generation), namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def request_stop(job_id: str, generation: int) -> None:
    get_or_create_control().request_stop.remote(job_id, generation)


def kill_run(job_id: str, generation: int) -> bool:
    """Hard stop: kill the run actor (and with it the Train controller and workers)."""
    try:
        actor = ray.get_actor(run_actor_name(job_id, generation), namespace=NAMESPACE)
    except ValueError:
        return False
    ray.kill(actor, no_restart=True)
    return True
