"""What one checkpoint-restart costs a job: one model, from measurements.

Why one model: the Lyra policy weighs a resize against what it gains
(``resize_cost_s``) and the simulator charges each restart an overhead; both used to be
guesses (60 s and 0 s). Both now come from here:

    restart_s = stop_signal + checkpoint + relaunch + max(workers_up + first_step, worker_floor)

* the first three phases and the local worker start are the medians of the live
  runtime's own records of real resizes (``lyra_ray/runtime/restart_phases.py``), taken
  by ``benchmarks/resize_phases.py`` on a local cluster of fake GPUs (this project's
  2-core host, Ray 2.60, a tiny model), from the scheduler's decision on, with the
  default (warm) executor: Ray's and lyra's overheads; the workers' processes outlive
  a run, so process start and ``import torch`` are paid once per worker, not per
  restart (#47; the Ray Train path's figures are beside them in the same file);
* ``worker_floor`` is what the slowest worker of a resize pays on a real GPU, measured on
  an NVIDIA H200 by ``benchmarks/gpu_warm_restart.py``
  (``benchmarks/results/gpu_warm_restart.json``): a warm spare, torch imported long
  before, that initialises CUDA (it may not before its GPUs are known:
  :mod:`lyra_ray.runtime.gang_worker`), builds ResNet-50, restores a 200 MB checkpoint
  and takes two steps. A grow's joining worker pays that; a shrink's surviving workers
  pay less (the same worker's loop called again: 0.32 s there), and a worker started
  from nothing more (the H200's cold start, :data:`H200_COLD_START_S`, ``import torch``
  included). Where the local worker start is slower than the floor, it binds instead.
  Before that measurement the floor was the cold start, which the warm runtime no
  longer pays per restart.

``tests/unit/test_restart_cost.py`` keeps these constants equal to their sources.

**One job's price** (:class:`RestartModel`). The phases above were measured on a tiny
model with a checkpoint of a few kilobytes, whose workers start like the H200's
ResNet-50. A job states what differs (``JobSpec.checkpoint_mb``, ``JobSpec.startup_s``)
and is priced as::

    stop_signal + (checkpoint + size * SAVE_S_PER_GB) + relaunch
        + max(workers_up + first_step, startup) + size * RESTORE_S_PER_GB

with the per-GB costs of writing a checkpoint (``torch.save`` and Ray Train persisting
it) and reading it back, measured on this host by ``benchmarks/checkpoint_io.py``, and
``startup`` the job's own start-up (else the H200 warm spare's floor). Once the live runtime has
restarted the job, the phases of its own latest restart (``lyra status``'s
``last_restart``, fed back as :class:`lyra_ray.model.messages.RestartMeasured`) replace
the modelled ones phase by phase: they already include its checkpoint and start-up.

Every figure a re-measurement may change is here, in :data:`MEASURED`,
:data:`SAVE_S_PER_GB` and :data:`RESTORE_S_PER_GB`; the policies and the simulator
only call :meth:`RestartModel.price`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the snapshot holds a model: types imports this module
    from lyra_ray.model.types import JobSpec


@dataclass(frozen=True)
class RestartCost:
    stop_signal_s: float
    checkpoint_s: float
    relaunch_s: float
    workers_up_s: float
    first_step_s: float
    worker_floor_s: float

    @property
    def total_s(self) -> float:
        worker = max(self.workers_up_s + self.first_step_s, self.worker_floor_s)
        return self.stop_signal_s + self.checkpoint_s + self.relaunch_s + worker


H200_COLD_START_S = 8.07
"""Median ``total`` of the four ``cold_start_resnet50`` runs on the H200 (7.13, 7.97,
8.17, 10.87 s): ~2.5-4.2 s importing torch, ~3.7-5.6 s building ResNet-50 on the host
CPU, 0.1 s restoring 200 MB, 0.6 s for the first step. What a worker started from nothing
pays (a grow with no spare waiting); the model's floor is the warm spare's."""

H200_WARM_SPARE_S = 5.02
"""Median, over the four spares that did not warm up, of ``device_init`` plus their first
run's ``total`` in ``benchmarks/results/gpu_warm_restart.json`` (4.66, 4.91, 5.14,
5.33 s): 0.15 s initialising CUDA, 0.2 s building ResNet-50, 3.7 s its first move to the
device (CUDA loading its kernels on first use), 0.2 s restoring 200 MB, 0.7 s for the
first step. A spare that had warmed its kernels up while it waited restarted in 0.83-0.96
s; ours may not touch CUDA before its GPUs are known, so it does not."""

MEASURED = RestartCost(
    stop_signal_s=0.14,
    checkpoint_s=0.01,
    relaunch_s=0.08,
    workers_up_s=0.24,
    first_step_s=0.08,
    worker_floor_s=H200_WARM_SPARE_S,
)
"""Medians of ``benchmarks/results/resize_phases.json`` (``median_s``: its warm run),
and the H200 warm spare's floor."""

RESTART_S = round(MEASURED.total_s, 1)
"""Seconds one restart (a resize, or a preemption and resume) costs a job: the Lyra
policy's ``resize_cost_s`` and ``lyra simulate``'s ``--resize-overhead`` default."""

SAVE_S_PER_GB = 5.554
"""Seconds per GB to write a checkpoint and persist it into the run's storage
(``benchmarks/results/checkpoint_io.json``, ``save.s_per_gb``)."""
RESTORE_S_PER_GB = 1.176
"""Seconds per GB to read a checkpoint back from storage, page cache dropped
(``benchmarks/results/checkpoint_io.json``, ``restore.s_per_gb``)."""
WORKER_PHASES = ("workers_up_s", "first_step_s")


def restart_s(
    phases: RestartCost,
    checkpoint_mb: float | None = None,
    startup_s: float | None = None,
    own: Mapping[str, float] | None = None,
) -> float:
    """One restart of a job with this checkpoint and start-up (module doc); ``own``: the
    phases its latest live restart measured, which replace the modelled ones."""
    gb = (checkpoint_mb or 0.0) / 1000.0
    got = own or {}
    stop = got.get("stop_signal_s", phases.stop_signal_s)
    save = got.get("checkpoint_s", phases.checkpoint_s + gb * SAVE_S_PER_GB)
    relaunch = got.get("relaunch_s", phases.relaunch_s)
    if all(k in got for k in WORKER_PHASES):
        worker = got["workers_up_s"] + got["first_step_s"]
    else:
        floor = phases.worker_floor_s if startup_s is None else startup_s
        worker = max(phases.workers_up_s + phases.first_step_s, floor) + gb * RESTORE_S_PER_GB
    return stop + save + relaunch + worker


class RestartModel:
    """Prices a job's restart: measured phases, its checkpoint and start-up, and what its
    own live restarts measured (module doc). State: the per-job measurements."""

    def __init__(self, phases: RestartCost = MEASURED) -> None:
        self.phases = phases
        self.observed: dict[str, dict[str, float]] = {}
        """Job id -> the phases of its latest restart (a phase it did not reach keeps
        the previous measurement)."""
        self._cache: dict[str, tuple[JobSpec, float]] = {}

    def price(self, job_id: str, spec: JobSpec) -> float:
        """Seconds one restart (a resize, or a preemption and resume) costs the job."""
        hit = self._cache.get(job_id)
        if hit is not None and hit[0] is spec:
            return hit[1]
        v = restart_s(self.phases, spec.checkpoint_mb, spec.startup_s, self.observed.get(job_id))
        self._cache[job_id] = (spec, v)
        return v

    def observe(self, job_id: str, phases: Mapping[str, float]) -> None:
        """A live restart of ``job_id`` closed with these phases (seconds)."""
        good = {
            k: float(v)
            for k, v in phases.items()
            if k in _PHASE_NAMES and isinstance(v, int | float) and math.isfinite(v) and v >= 0
        }
        if good:
            self.observed.setdefault(job_id, {}).update(good)
            self._cache.pop(job_id, None)

    def forget(self, job_id: str) -> None:
        self.observed.pop(job_id, None)
        self._cache.pop(job_id, None)

    def to_state(self) -> dict[str, Any]:
        return {"observed": {j: dict(p) for j, p in sorted(self.observed.items())}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.observed = {
            str(j): {str(k): float(v) for k, v in p.items()}
            for j, p in state.get("observed", {}).items()
        }
        self._cache = {}


_PHASE_NAMES = frozenset(("stop_signal_s", "checkpoint_s", "relaunch_s", *WORKER_PHASES))
