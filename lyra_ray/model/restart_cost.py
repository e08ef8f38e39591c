"""What one checkpoint-restart costs a job: one model, from measurements.

Why one model: the Lyra policy weighs a resize against what it gains
(``resize_cost_s``) and the simulator charges each restart an overhead; both used to be
guesses (60 s and 0 s). Both now come from here:

    restart_s = stop_signal + checkpoint + relaunch + max(workers_up + first_step, cold_start)

* the first three phases and the local worker start are the medians of the live
  runtime's own records of real resizes (``lyra_ray/runtime/restart_phases.py``), taken
  by ``benchmarks/resize_phases.py`` on a local cluster of fake GPUs (this project's
  2-core host, Ray 2.60, a tiny model), from the scheduler's decision on, with the
  default (warm) executor: Ray's and lyra's overheads; the workers' processes outlive
  a run, so process start and ``import torch`` are paid once per worker, not per
  restart (#47; the Ray Train path's figures are beside them in the same file);
* ``cold_start`` is the per-worker floor on a real GPU: a fresh process from
  ``import torch`` to its second ResNet-50 step with a 200 MB checkpoint restored,
  measured on an NVIDIA H200 (``../shared/data/gpu/h200.json``, ``cold_start_resnet50``,
  2026-11-26, the same machine and provenance as the catalogue's ``h200`` rows), median
  of four runs. A worker cannot restart faster than that, whatever the cluster manager
  does; where the local worker start is slower, it binds instead.

``tests/unit/test_restart_cost.py`` keeps these constants equal to their sources.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartCost:
    stop_signal_s: float
    checkpoint_s: float
    relaunch_s: float
    workers_up_s: float
    first_step_s: float
    cold_start_s: float

    @property
    def total_s(self) -> float:
        worker = max(self.workers_up_s + self.first_step_s, self.cold_start_s)
        return self.stop_signal_s + self.checkpoint_s + self.relaunch_s + worker


H200_COLD_START_S = 8.07
"""Median ``total`` of the four ``cold_start_resnet50`` runs on the H200 (7.13, 7.97,
8.17, 10.87 s): ~2.5-4.2 s importing torch, ~3.7-5.6 s building ResNet-50 on the host
CPU, 0.1 s restoring 200 MB, 0.6 s for the first step."""

MEASURED = RestartCost(
    stop_signal_s=0.14,
    checkpoint_s=0.01,
    relaunch_s=0.08,
    workers_up_s=0.24,
    first_step_s=0.08,
    cold_start_s=H200_COLD_START_S,
)
"""Medians of ``benchmarks/results/resize_phases.json`` (``median_s``: its warm run),
and the H200 floor."""

RESTART_S = round(MEASURED.total_s, 1)
"""Seconds one restart (a resize, or a preemption and resume) costs a job: the Lyra
policy's ``resize_cost_s`` and ``lyra simulate``'s ``--resize-overhead`` default."""
