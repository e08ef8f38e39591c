"""Train loops for the chaos campaign: the example model, one whose code raises, and one
slowed where a resize spends its time.

Importable by the Ray workers of a test cluster (the repository is on their
PYTHONPATH), named in job specs as ``tests.chaos.entrypoints:<function>``.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from lyra_ray.jobs.train_example import _Pace, make_model, synthetic_batch, train_loop
from lyra_ray.train import StepLoop


def failing_loop(config: dict[str, Any]) -> None:
    """Steps until ``fail_at``, then raises: the user's code failing, not the system."""
    loop = StepLoop(config)
    loop.restore()
    fail_at = int(config.get("fail_at", 5))
    for step in loop.steps(lambda: {}):
        if step >= fail_at:
            raise ValueError(f"user code raised at step {step}")


def slow_resize_loop(config: dict[str, Any]) -> None:
    """The example model (no DDP: each rank steps alone), slowed at the two moments of a
    resize a test kills a worker in: the checkpoint a stop writes (``stop_save_s``, on
    its way out) and a resumed run's start, restored but not yet stepped (``resume_s``).
    Rank 0 logs "generation step" lines to ``step_log``; ``pace_file`` sets its pause
    after each step as the example job's does (a test slows it while it waits on events)."""
    loop = StepLoop(config)
    pace = _Pace(config.get("pace_file"), float(config.get("step_sleep_s", 0.05)))
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    state = loop.restore()
    if state is not None:
        model.load_state_dict(state["model"])
        time.sleep(float(config.get("resume_s", 0.0)))

    def state_fn() -> dict[str, Any]:
        if loop.stopped:
            time.sleep(float(config.get("stop_save_s", 0.0)))
        return {"model": model.state_dict()}

    log = config.get("step_log") if loop.rank == 0 else None
    for step in loop.steps(state_fn):
        x, y = synthetic_batch(step, loop.rank, 8)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        time.sleep(pace.now())
        if log:
            with open(log, "a") as f:
                f.write(f"{loop.generation} {step}\n")


__all__ = ["failing_loop", "slow_resize_loop", "train_loop"]
