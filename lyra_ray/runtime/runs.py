"""Runs of a job, as the scheduler's runtime starts, stops and kills them.

Two executors (``RunRequest.executor``, the scheduler's ``executor`` setting):

* ``warm`` (the default): the job's gang (:mod:`lyra_ray.runtime.gang`), one detached
  actor per job whose warm worker processes run generation after generation; a resize
  keeps the processes that stay and fills new GPU slots with warm spares.
* ``ray_train``: one detached actor per run (``lyra-run-<job>-g<n>``) that calls
  ``TorchTrainer.fit()`` (a new Ray Train controller and worker group per run: the path
  before #47, kept as the resize benchmark's baseline).

Either way the scheduler's side is the same: ``start_run`` registers the generation in
the control actor first (with the request, for a gang), a stop is asked through the
control actor and met by the loop between two steps, and the run's end is recorded
there. Detached, because a non-detached owner takes its children down with it: killing
the scheduler must not kill a training job.

The run name and storage path are stable per job, so a rerun writes its checkpoints
next to the old ones and :func:`lyra_ray.train.storage.newest_checkpoint` finds the newest.

The gang, or the run actor, is created with the job's own runtime env (its user's
directory, modules, packages, variables: :mod:`lyra_ray.runtime.user_env`). Ray hands a
parent's runtime env down to the tasks and actors it starts, so every worker runs in it
too (checked on Ray 2.60: an actor created with only ``env_vars``, as Train creates its
controller and workers, keeps its parent's ``working_dir``, and the ``env_vars`` merge).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import ray

from lyra_ray.contract.names import NAMESPACE, RESUME_KEY, gang_actor_name, run_actor_name
from lyra_ray.runtime.control import get_or_create_control
from lyra_ray.runtime.run_outcome import failure
from lyra_ray.runtime.run_request import EXECUTORS, RunRequest, run_name, worker_selectors
from lyra_ray.train.storage import newest_checkpoint
from lyra_ray.train.user_code import load_entrypoint, user_loop

log = logging.getLogger(__name__)

__all__ = ["EXECUTORS", "RunRequest", "failure", "run_name", "worker_selectors"]


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
            resume = newest_checkpoint(os.path.join(req.storage_path, run_name(req.job_id)))
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
            step = (result.metrics or {}).get("step")
            if step is None:  # the loop reported last without StepLoop's step (its own)
                found = newest_checkpoint(os.path.join(req.storage_path, run_name(req.job_id)))
                step = found[1] if found else None
            steps = float(step) if step is not None else steps
            outcome = "completed" if steps >= req.total_steps else "stopped"
            message = ""
        except Exception as e:  # the user's loop failed, a worker died, or a stop tore it down
            log.exception("run %s/%d failed", req.job_id, req.generation)
            stopping = ray.get(control.should_stop.remote(req.job_id, req.generation))
            outcome, message = ("stopped", "") if stopping else failure(e)
            found = newest_checkpoint(os.path.join(req.storage_path, run_name(req.job_id)))
            steps = float(found[1]) if found else 0.0
        ray.get(control.finish.remote(req.job_id, req.generation, outcome, steps, message))
        self.outcome = outcome
        return outcome


def start_run(req: RunRequest, gang_settings: Mapping[str, Any] | None = None) -> None:
    """Start (or resume) a run of ``req.generation`` (older generations see should_stop).

    A run whose runtime env names a package the cluster's GCS no longer holds (a
    ``lyra down`` / ``lyra up`` in between: packages live in the GCS, checkpoints on
    disk) is not started: its run ends at once as failed, naming the package, rather
    than an actor that cannot start and vanishes without a word."""
    from lyra_ray.runtime.job_env import missing_packages

    if req.executor not in EXECUTORS:
        raise ValueError(f"executor {req.executor!r} is not one of {', '.join(EXECUTORS)}")
    control = get_or_create_control()
    warm = req.executor == "warm"
    ray.get(control.begin.remote(req.job_id, req.generation, req if warm else None))
    missing = missing_packages(req.runtime_env)
    if missing:
        why = (
            f"the job's runtime env package {missing[0]} is gone from this Ray cluster "
            "(packages live in the cluster's GCS, which a new cluster does not have): "
            "submit the job again from its directory"
        )
        ray.get(control.finish.remote(req.job_id, req.generation, "failed", 0.0, why))
        return
    if warm:
        _gang_for(req, gang_settings).wake.remote(req.generation, req)
    else:
        actor = TrainRun.options(  # type: ignore[attr-defined]
            name=run_actor_name(req.job_id, req.generation),
            namespace=NAMESPACE,
            lifetime="detached",
            resources={"node:__internal_head__": 0.001},
            runtime_env=dict(req.runtime_env) if req.runtime_env else None,
        ).remote(req)
        del actor  # detached: it runs on without a handle
    log.info("launched %s gen %d with %d workers", req.job_id, req.generation, req.workers)


def _gang_for(req: RunRequest, settings: Mapping[str, Any] | None) -> Any:
    """The job's gang, created (detached, named, with the job's runtime env) if none runs.

    Creating it does not wait for its process: the request already waits in the
    control actor, where the gang looks first."""
    from lyra_ray.runtime.gang import Gang

    return Gang.options(  # type: ignore[attr-defined]
        name=gang_actor_name(req.job_id),
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={"node:__internal_head__": 0.001},
        runtime_env=dict(req.runtime_env) if req.runtime_env else None,
    ).remote(req.job_id, dict(settings or {}), (req.generation, req))


def _gang(job_id: str) -> Any | None:
    try:
        return ray.get_actor(gang_actor_name(job_id), namespace=NAMESPACE)
    except ValueError:
        return None


def run_alive(job_id: str, generation: int, executor: str = "ray_train") -> bool:
    """Whether the process carrying the run out still exists (its gang, or its actor)."""
    if executor == "warm":
        return _gang(job_id) is not None
    try:
        ray.get_actor(run_actor_name(job_id, generation), namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def request_stop(job_id: str, generation: int, keep: Mapping[str, float] | None = None) -> None:
    """Ask the run to stop between two steps; ``keep``: GPUs per node the next
    generation holds again (a resize), which a gang keeps rather than frees."""
    get_or_create_control().request_stop.remote(job_id, generation, dict(keep or {}))


def release(job_id: str) -> None:
    """The job's next generation is not coming soon: its gang frees kept slots."""
    gang = _gang(job_id)
    if gang is not None:
        gang.release.remote()


def kill_run(job_id: str, generation: int, executor: str = "ray_train") -> bool:
    """Hard stop: a gang kills the run's workers (not asked: killed; their slots freed);
    a Ray Train run's actor is killed, and with it its controller and workers."""
    if executor == "warm":
        gang = _gang(job_id)
        if gang is None:
            return False
        gang.abort.remote(generation)
        return True
    try:
        actor = ray.get_actor(run_actor_name(job_id, generation), namespace=NAMESPACE)
    except ValueError:
        return False
    ray.kill(actor, no_restart=True)
    return True


def end_job(job_id: str) -> None:
    """The job is over (finished, failed, cancelled): its gang, with its workers and
    GPU slots, ends."""
    gang = _gang(job_id)
    if gang is not None:
        ray.kill(gang, no_restart=True)
