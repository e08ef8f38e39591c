"""The profiling job's Train loop, and the inbox its results go to (Ray).

``lyra profile run`` submits profiling jobs through the scheduler like any job, so their
GPUs are the scheduler's to give and never collide with scheduled work. Each profiling
job is pinned to one GPU type and holds its workers while it measures; every
measurement is one step of its :class:`~lyra_ray.train.StepLoop`, so a preempted
profile resumes at the next measurement, and ``lyra status`` shows how far it is.

One-worker measurements (alone and pairs) run in processes of their own
(:func:`lyra_ray.profiling.core.measure`), as jobs sharing a GPU do; a job measured at
several workers runs its own Train loop in every worker of this run, in profile mode.
"""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

import ray

from lyra_ray.contract.names import NAMESPACE
from lyra_ray.contract.profiling import PROFILE_KEY, set_active
from lyra_ray.profiling.core import measure
from lyra_ray.profiling.meter import Meter, MeterSettings
from lyra_ray.train import StepLoop
from lyra_ray.train.signature import call_loop

log = logging.getLogger(__name__)

JOB_KEY = "lyra_profiling_job"
"""The profiling job's own config key (not :data:`PROFILE_KEY`: this loop is a normal
lyra job; the loops it measures run in profile mode)."""


@ray.remote(num_cpus=0)
class ProfileInbox:
    """Results by measurement id, owned by the ``lyra profile`` driver (it goes with it)."""

    def __init__(self) -> None:
        self.results: dict[str, list[dict[str, Any]]] = {}

    def put(self, mid: str, result: list[dict[str, Any]]) -> None:
        self.results[mid] = result

    def get(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.results)


def profile_loop(config: dict[str, Any]) -> None:
    """``train_loop_per_worker`` of a profiling job: one measurement per step."""
    job = config[JOB_KEY]
    loop = StepLoop(config)
    state = loop.restore()
    done: dict[str, Any] = dict(state["results"]) if state else {}
    inbox = None
    if loop.rank == 0:
        try:
            inbox = ray.get_actor(job["inbox"], namespace=NAMESPACE)
        except ValueError:
            log.warning("no profile inbox %s: results only in checkpoints", job["inbox"])
    settings = MeterSettings.from_dict(job["settings"])
    for i in loop.steps(lambda: {"results": done}):
        m = job["measurements"][i]
        if m["workers"] == 1:
            sides = [job["sides"][k] for k in m["jobs"]]
            result = measure(sides, settings, on_line=log.info) if loop.rank == 0 else []
        else:
            result = _in_train(job["loops"][m["jobs"][0]], settings, loop.rank)
        if loop.rank == 0:
            done[m["id"]] = result
            if inbox is not None:
                ray.get(inbox.put.remote(m["id"], result))


def _in_train(spec: dict[str, Any], settings: MeterSettings, rank: int) -> list[dict[str, Any]]:
    """The job's own Train loop on every worker of this run, measured on rank 0 (whose
    stop flag the loop's all-reduce carries to the others)."""
    meter = Meter(settings)

    def hook(steps: int) -> bool:
        meter.tick(time.monotonic(), steps)
        return meter.done

    set_active(hook if rank == 0 else None)
    try:
        module, fn = str(spec["entrypoint"]).split(":")
        call_loop(  # as Ray Train calls it: with the config, or with nothing
            getattr(importlib.import_module(module), fn),
            {**dict(spec.get("config") or {}), PROFILE_KEY: {"in_train": True}},
        )
    except Exception as e:
        return [{"error": f"{type(e).__name__}: {e}"}]
    finally:
        set_active(None)
    return [meter.result()]
